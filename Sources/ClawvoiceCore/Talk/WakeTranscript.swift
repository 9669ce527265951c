// WakeTranscript: what is left of a wake capture's transcript once the trigger words are taken
// off (the talk machine sends only that; too little left is no command).

import Foundation

public enum WakeTranscript {
    /// The command in a wake transcript: the text after the first trigger, without the
    /// punctuation and spaces that follow it. Without a trigger in the text, the whole text, trimmed.
    ///
    /// A trigger is found however the transcript spells it: letters and digits are compared with
    /// case, accents, spaces, hyphens and punctuation ignored, so "Open claw, what time is it?",
    /// "open-claw what time is it" and "OpenClaw: what time is it" all give "what time is it".
    /// The match must start and end on word boundaries ("openclaws" and "reopen claw" are not it).
    public static func command(from transcript: String, triggers: [String]) -> String {
        let trim = CharacterSet.whitespacesAndNewlines.union(.punctuationCharacters)
        let chars = Array(transcript)
        func isWordChar(_ c: Character) -> Bool { c.isLetter || c.isNumber }
        func fold(_ c: Character) -> String {
            String(c).folding(options: [.caseInsensitive, .diacriticInsensitive], locale: nil).lowercased()
        }
        // The transcript's letters and digits, folded, each with the index of its character.
        var letters: [Character] = []
        var origin: [Int] = []
        for (i, c) in chars.enumerated() where isWordChar(c) {
            for f in fold(c) { letters.append(f); origin.append(i) }
        }
        var bestStart: Int?
        var bestEnd = 0  // index in `chars` just past the trigger
        for t in triggers {
            let needle = Array(t.filter(isWordChar).map(fold).joined())
            guard !needle.isEmpty, needle.count <= letters.count else { continue }
            var k = 0
            while k + needle.count <= letters.count {
                defer { k += 1 }
                guard Array(letters[k..<k + needle.count]) == needle else { continue }
                let first = origin[k], last = origin[k + needle.count - 1]
                // Whole characters only, on word boundaries in the original text.
                if k > 0 && origin[k - 1] == first { continue }
                if k + needle.count < letters.count && origin[k + needle.count] == last { continue }
                if first > 0 && isWordChar(chars[first - 1]) { continue }
                if last + 1 < chars.count && isWordChar(chars[last + 1]) { continue }
                if bestStart == nil || first < bestStart! { bestStart = first; bestEnd = last + 1 }
                break
            }
        }
        let rest = bestStart == nil ? transcript : String(chars[bestEnd...])
        return rest.trimmingCharacters(in: trim)
    }
}
