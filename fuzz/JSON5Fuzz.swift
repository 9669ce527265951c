// libFuzzer target for the JSON5 config reader (Sources/NodeRuntime/JSON5.swift), built with
// GatewayProtocol's sources by fuzz/run.sh. Properties checked on every input:
//   * JSON5.parse never crashes (however deep the nesting) and any error names a line and
//     column inside the text.
//   * A document that parses re-encodes as JSON, and that JSON parses again to the same value
//     (NaN and Infinity, which JSON cannot carry, excepted).

import Foundation

private func hasNonFinite(_ v: JSONValue) -> Bool {
    switch v {
    case .number(let d): return !d.isFinite
    case .array(let a): return a.contains(where: hasNonFinite)
    case .object(let o): return o.values.contains(where: hasNonFinite)
    default: return false
    }
}

@_cdecl("LLVMFuzzerTestOneInput")
public func fuzz(_ data: UnsafePointer<UInt8>, _ size: Int) -> CInt {
    let text = String(decoding: UnsafeBufferPointer(start: data, count: size), as: UTF8.self)
    let value: JSONValue
    do {
        value = try JSON5.parse(text)
    } catch {
        // Lines as the parser counts them: by "\n" scalars. (Splitting the String by Character
        // missed the breaks inside "\r\n" graphemes: fuzz/regressions/json5/crlf-comment-line-count.)
        let lines = text.unicodeScalars.filter { $0 == "\n" }.count + 1
        if error.line < 1 || error.line > lines || error.column < 1 { fatalError("error outside the text: \(error)") }
        if error.description.contains("\n") { fatalError("error is more than one line: \(error)") }
        return 0
    }
    guard !hasNonFinite(value) else { return 0 }
    guard let json = try? JSONCoding.string(value) else { fatalError("parsed value does not encode: \(value)") }
    guard let again = try? JSON5.parse(json) else { fatalError("re-encoded JSON does not parse: \(json)") }
    if again != value { fatalError("round trip changed the value: \(value) -> \(again)") }
    return 0
}
