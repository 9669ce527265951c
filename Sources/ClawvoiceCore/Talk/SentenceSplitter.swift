// Cuts a streaming reply into speakable sentences as the text arrives: at `.`, `!`, `?`
// followed by white space, at newlines, and softly at white space past 72 characters; fenced
// code is skipped; a first-line JSON voice directive is taken out. Pure: text in, sentences out.

import Foundation

public struct SentenceSplitter: Sendable {
    public let softLimit: Int
    public private(set) var directive: VoiceDirective?
    private var text: [Character] = []
    private var position = 0
    private var atLineStart = true
    private var inFence = false
    private var sawContent = false

    public init(softLimit: Int = 72) { self.softLimit = softLimit }

    /// Appends new text (a `deltaText`) and returns the sentences it completed.
    public mutating func feed(_ delta: String) -> [String] {
        text.append(contentsOf: delta)
        return drain(final: false)
    }

    /// Takes a cumulative snapshot (`message` of a delta event, or the final text): only what
    /// extends the text seen so far is new. A snapshot that rewrites earlier text restarts the
    /// unspoken part from where the snapshot and the old text still agree.
    public mutating func snapshot(_ full: String) -> [String] {
        let f = Array(full)
        if f.count >= text.count && Array(f.prefix(text.count)) == text {
            text = f
        } else {
            var common = 0
            while common < min(f.count, text.count) && f[common] == text[common] { common += 1 }
            text = f
            position = min(position, common)
        }
        return drain(final: false)
    }

    /// The reply ended: whatever is left is the last sentence.
    public mutating func finish() -> [String] { drain(final: true) }

    private mutating func drain(final: Bool) -> [String] {
        var out: [String] = []
        while position < text.count {
            // A directive can only be the first non-empty line: wait for its newline.
            if !sawContent && atLineStart {
                var i = position
                while i < text.count && (text[i] == " " || text[i] == "\t") { i += 1 }
                if i < text.count && text[i] == "{" {
                    guard let nl = index(of: "\n", from: i) else {
                        if !final { return out }
                        let line = String(text[i...])
                        position = text.count
                        if !takeDirective(line) { out += emit(line) }
                        continue
                    }
                    let line = String(text[i..<nl])
                    if takeDirective(line) {
                        position = nl + 1
                        atLineStart = true
                        continue
                    }
                }
            }
            // Fences: a line starting with ``` opens or closes a code block; code is not read aloud.
            if atLineStart {
                var i = position
                while i < text.count && (text[i] == " " || text[i] == "\t") { i += 1 }
                if i + 2 < text.count ? (text[i] == "`" && text[i + 1] == "`" && text[i + 2] == "`") : false {
                    guard let nl = index(of: "\n", from: i) else {
                        if final { position = text.count }
                        return out
                    }
                    inFence.toggle()
                    position = nl + 1
                    continue
                } else if i + 2 >= text.count && !final && i < text.count && text[i] == "`" {
                    return out  // might be the start of a fence: wait for more
                }
            }
            if inFence {
                guard let nl = index(of: "\n", from: position) else {
                    if final { position = text.count }
                    return out
                }
                position = nl + 1
                atLineStart = true
                continue
            }
            guard let (end, next) = boundary(final: final) else { return out }
            out += emit(String(text[position..<end]))
            position = next
            atLineStart = next > 0 && text[next - 1] == "\n"
        }
        return out
    }

    /// The end of the next sentence (exclusive) and where the one after starts.
    private func boundary(final: Bool) -> (Int, Int)? {
        var i = position
        while i < text.count {
            let c = text[i]
            if c == "\n" { return (i, i + 1) }
            if c == "." || c == "!" || c == "?" {
                var j = i + 1
                // Keep closing quotes and brackets with their sentence.
                while j < text.count && "\"')]”’»".contains(text[j]) { j += 1 }
                if j < text.count {
                    if text[j].isWhitespace { return (j, j + 1) }
                } else if final {
                    return (j, j)
                }
            }
            if i - position >= softLimit && c.isWhitespace { return (i, i + 1) }
            i += 1
        }
        return final ? (text.count, text.count) : nil
    }

    private func index(of c: Character, from: Int) -> Int? {
        var i = from
        while i < text.count { if text[i] == c { return i }; i += 1 }
        return nil
    }

    private mutating func takeDirective(_ line: String) -> Bool {
        let (d, rest) = VoiceDirective.split(line)
        guard let d, rest.isEmpty else { return false }
        directive = d
        return true
    }

    private mutating func emit(_ s: String) -> [String] {
        let t = s.trimmingCharacters(in: .whitespacesAndNewlines)
        // Nothing worth a voice: punctuation, list markers, stray backticks.
        guard t.contains(where: { $0.isLetter || $0.isNumber }) else { return [] }
        sawContent = true
        return [t]
    }
}
