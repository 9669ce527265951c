// A small JSON5 reader for the config file: it reports the line and column of the first
// mistake, which Foundation's JSON5 decoder does not.

public import GatewayProtocol

/// Where and why a JSON5 text is malformed.
public struct JSON5Error: Error, Sendable, Equatable, CustomStringConvertible {
    public var line: Int
    public var column: Int
    public var reason: String
    public var description: String { "line \(line), column \(column): \(reason)" }
}

public enum JSON5 {
    /// Text from the document as an error line shows it: control characters escaped (a key
    /// holding "\n" made a multi-line error; the JSON5 fuzz target found it) and at most 40
    /// characters.
    static func shown(_ text: String) -> String {
        var out = ""
        var count = 0
        for u in text.unicodeScalars {
            if count == 40 { out += "…"; break }
            switch u {
            case "\n": out += "\\n"
            case "\r": out += "\\r"
            case "\t": out += "\\t"
            case "'": out += "\\'"
            default:
                if u.properties.generalCategory == .control || u.properties.generalCategory == .lineSeparator
                    || u.properties.generalCategory == .paragraphSeparator || u.properties.generalCategory == .format {
                    out += "\\u{\(String(u.value, radix: 16))}"
                } else {
                    out.unicodeScalars.append(u)
                }
            }
            count += 1
        }
        return out
    }

    /// Deepest nesting accepted. The parser recurses once per level, and about 34,000 levels
    /// overflowed the stack; a real config is under ten deep.
    public static let maxDepth = 64

    public static func parse(_ text: String, maxDepth: Int = JSON5.maxDepth) throws(JSON5Error) -> JSONValue {
        var p = Parser(Array(text.unicodeScalars))
        p.maxDepth = maxDepth
        p.skipSpace()
        let v = try p.value()
        try p.skipSpaceChecked()
        if !p.atEnd { throw p.error("unexpected \(p.peekDescription) after the end of the document") }
        return v
    }

    struct Parser {
        let s: [Unicode.Scalar]
        var i = 0
        var depth = 0
        var maxDepth = JSON5.maxDepth
        init(_ s: [Unicode.Scalar]) { self.s = s }

        /// Enters one more level of `{`/`[` at the current position, or says where it went too deep.
        mutating func enter() throws(JSON5Error) {
            depth += 1
            if depth > maxDepth { throw error("nested deeper than \(maxDepth) levels") }
        }

        var atEnd: Bool { i >= s.count }
        var peek: Unicode.Scalar? { i < s.count ? s[i] : nil }
        var peekDescription: String { peek.map { "'\(Character($0))'" } ?? "end of file" }

        func error(_ reason: String) -> JSON5Error {
            var line = 1, col = 1
            for k in 0..<min(i, s.count) {
                if s[k] == "\n" { line += 1; col = 1 } else { col += 1 }
            }
            return JSON5Error(line: line, column: col, reason: reason)
        }

        mutating func skipSpace() { try? skipSpaceChecked() }

        mutating func skipSpaceChecked() throws(JSON5Error) {
            while let c = peek {
                if c == " " || c == "\t" || c == "\n" || c == "\r" || c == "\u{FEFF}" || c == "\u{A0}" { i += 1; continue }
                if c == "/" && i + 1 < s.count {
                    if s[i + 1] == "/" { while let d = peek, d != "\n" { _ = d; i += 1 }; continue }
                    if s[i + 1] == "*" {
                        let start = i
                        i += 2
                        while i + 1 < s.count && !(s[i] == "*" && s[i + 1] == "/") { i += 1 }
                        if i + 1 >= s.count { i = start; throw error("unterminated /* comment") }
                        i += 2
                        continue
                    }
                }
                break
            }
        }

        mutating func value() throws(JSON5Error) -> JSONValue {
            guard let c = peek else { throw error("unexpected end of file, expected a value") }
            switch c {
            case "{": return try object()
            case "[": return try array()
            case "\"", "'": return .string(try string())
            case "t", "f", "n", "I", "N":
                let word = identifier()
                switch word {
                case "true": return .bool(true)
                case "false": return .bool(false)
                case "null": return .null
                case "Infinity": return .number(.infinity)
                case "NaN": return .number(.nan)
                default: i -= word.unicodeScalars.count; throw error("unexpected word '\(JSON5.shown(word))' (strings need quotes)")
                }
            default:
                if c == "-" || c == "+" || c == "." || ("0"..."9").contains(c) { return .number(try number()) }
                if isIdentStart(c) {
                    let start = i
                    let word = identifier()
                    i = start
                    throw error("unexpected word '\(JSON5.shown(word))' (strings need quotes)")
                }
                throw error("unexpected '\(Character(c))'")
            }
        }

        func isIdentStart(_ c: Unicode.Scalar) -> Bool { c == "_" || c == "$" || c.properties.isAlphabetic }
        func isIdentPart(_ c: Unicode.Scalar) -> Bool { isIdentStart(c) || ("0"..."9").contains(c) }

        mutating func identifier() -> String {
            var out = ""
            while let c = peek, isIdentPart(c) { out.unicodeScalars.append(c); i += 1 }
            return out
        }

        mutating func object() throws(JSON5Error) -> JSONValue {
            try enter()
            defer { depth -= 1 }
            i += 1
            var o: [String: JSONValue] = [:]
            try skipSpaceChecked()
            while true {
                guard let c = peek else { throw error("unterminated object: missing '}'") }
                if c == "}" { i += 1; return .object(o) }
                let keyStart = i
                let key: String
                if c == "\"" || c == "'" { key = try string() }
                else if isIdentStart(c) { key = identifier() }
                else { throw error("expected a key or '}', found '\(Character(c))'") }
                try skipSpaceChecked()
                guard peek == ":" else { throw error("expected ':' after key '\(JSON5.shown(key))'") }
                i += 1
                try skipSpaceChecked()
                if o[key] != nil { i = keyStart; throw error("duplicate key '\(JSON5.shown(key))'") }
                o[key] = try value()
                try skipSpaceChecked()
                if peek == "," { i += 1; try skipSpaceChecked(); continue }
                if peek == "}" { i += 1; return .object(o) }
                throw error("expected ',' or '}' in object, found \(peekDescription)")
            }
        }

        mutating func array() throws(JSON5Error) -> JSONValue {
            try enter()
            defer { depth -= 1 }
            i += 1
            var a: [JSONValue] = []
            try skipSpaceChecked()
            while true {
                guard let c = peek else { throw error("unterminated array: missing ']'") }
                if c == "]" { i += 1; return .array(a) }
                a.append(try value())
                try skipSpaceChecked()
                if peek == "," { i += 1; try skipSpaceChecked(); continue }
                if peek == "]" { i += 1; return .array(a) }
                throw error("expected ',' or ']' in array, found \(peekDescription)")
            }
        }

        mutating func string() throws(JSON5Error) -> String {
            let quote = s[i]
            let start = i
            i += 1
            var out = ""
            while let c = peek {
                i += 1
                if c == quote { return out }
                if c == "\n" { i = start; throw error("unterminated string") }
                if c == "\\" {
                    guard let e = peek else { break }
                    i += 1
                    switch e {
                    case "n": out += "\n"
                    case "t": out += "\t"
                    case "r": out += "\r"
                    case "b": out += "\u{8}"
                    case "f": out += "\u{C}"
                    case "0": out += "\0"
                    case "\n": break  // line continuation
                    case "u":
                        guard i + 4 <= s.count, let v = UInt32(String(String.UnicodeScalarView(s[i..<i + 4])), radix: 16),
                              let u = Unicode.Scalar(v) else { throw error("bad \\u escape") }
                        out.unicodeScalars.append(u)
                        i += 4
                    default: out.unicodeScalars.append(e)
                    }
                } else {
                    out.unicodeScalars.append(c)
                }
            }
            i = start
            throw error("unterminated string")
        }

        mutating func number() throws(JSON5Error) -> Double {
            let start = i
            var text = ""
            while let c = peek, c == "+" || c == "-" || c == "." || c == "x" || c == "X" || c == "e" || c == "E"
                    || ("0"..."9").contains(c) || ("a"..."f").contains(c) || ("A"..."F").contains(c) || c == "I" {
                if c == "I" {
                    let word = identifier()
                    guard word == "Infinity" else { i = start; throw error("bad number") }
                    text += word
                    break
                }
                text.unicodeScalars.append(c)
                i += 1
            }
            var sign = 1.0
            var body = Substring(text)
            if body.hasPrefix("-") { sign = -1; body = body.dropFirst() } else if body.hasPrefix("+") { body = body.dropFirst() }
            if body == "Infinity" { return sign * .infinity }
            if body.lowercased().hasPrefix("0x"), let v = UInt64(body.dropFirst(2), radix: 16) { return sign * Double(v) }
            var normalized = String(body)
            if normalized.hasPrefix(".") { normalized = "0" + normalized }
            if normalized.hasSuffix(".") { normalized += "0" }
            guard let v = Double(normalized), !normalized.contains(where: { $0.isLetter && $0 != "e" && $0 != "E" }) else {
                i = start
                throw error("bad number '\(text)'")
            }
            return sign * v
        }
    }
}
