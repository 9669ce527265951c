// Cutting a streamed reply into sentences: every rule, fed whole and fed in random pieces.

import Testing
@testable import ClawvoiceCore

@Suite struct SentenceSplitterTests {
    func split(_ text: String) -> [String] {
        var s = SentenceSplitter()
        return s.feed(text) + s.finish()
    }

    @Test func `sentences end at terminal punctuation followed by space, and at newlines`() {
        #expect(split("Hello there. How are you? Fine!\nNext line") == ["Hello there.", "How are you?", "Fine!", "Next line"])
    }

    @Test func `decimals, versions and abbreviations without a following space do not cut`() {
        #expect(split("Pi is 3.14 today. Version 2.0.1 works.") == ["Pi is 3.14 today.", "Version 2.0.1 works."])
    }

    @Test func `a sentence is only given out once its end has arrived`() {
        var s = SentenceSplitter()
        #expect(s.feed("The weather is") == [])
        #expect(s.feed(" sunny.") == [], "the period may still be part of '...' or '.5'")
        #expect(s.feed(" Tomorrow") == ["The weather is sunny."])
        #expect(s.finish() == ["Tomorrow"])
    }

    @Test func `long text without punctuation is cut softly at white space after 72 characters`() {
        let long = String(repeating: "word ", count: 30)
        let parts = split(long)
        #expect(parts.count >= 2)
        #expect(parts.dropLast().allSatisfy { $0.count >= 72 && $0.count <= 80 })
    }

    @Test func `fenced code is not spoken`() {
        let reply = "Run this:\n```bash\nls -la\necho hi. there\n```\nThen it works."
        #expect(split(reply) == ["Run this:", "Then it works."])
    }

    @Test func `a first-line JSON directive is taken out and kept`() {
        var s = SentenceSplitter()
        let out = s.feed("{\"voice\":\"v1\",\"once\":true}\nHello. ") + s.finish()
        #expect(out == ["Hello."])
        #expect(s.directive?.voiceId == "v1" && s.directive?.once == true)
        #expect(split("{not a directive} Hello.") == ["{not a directive} Hello."])
    }

    @Test func `cumulative snapshots give the same sentences as deltas`() {
        var s = SentenceSplitter()
        var out = s.snapshot("One. Tw")
        out += s.snapshot("One. Two. Three")
        out += s.snapshot("One. Two. Three.")
        out += s.finish()
        #expect(out == ["One.", "Two.", "Three."])
    }

    @Test(arguments: [1, 2, 3, 5, 8, 13])
    func `feeding in pieces of any size gives the same sentences`(size: Int) {
        let reply = "{\"lang\":\"en\"}\nFirst sentence here. Second one?\n```\ncode.\n```\nThird, with 3.5 units! " + String(repeating: "long ", count: 20) + "end."
        let whole = split(reply)
        var s = SentenceSplitter()
        var pieces: [String] = []
        let chars = Array(reply)
        var i = 0
        while i < chars.count {
            pieces += s.feed(String(chars[i..<min(i + size, chars.count)]))
            i += size
        }
        pieces += s.finish()
        #expect(pieces == whole)
        #expect(whole.first == "First sentence here.")
        #expect(!whole.contains { $0.contains("code") })
    }
}
