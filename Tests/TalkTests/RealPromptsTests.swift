// Which real recordings the end-of-speech bench scores (issue 25): RealPrompts keeps the asterisk
// prompts whose transcript goes on after a pause, and leaves out fragments and one-clause prompts.

import ClawvoiceTesting
import Testing

@Suite struct RealPromptsTests {
    @Test func `prompts that go on after a comma or a sentence are kept, fragments and single clauses are not`() {
        let transcript = """
        agent-newlocation: Please enter a new extension, followed by pound.
        activated: Activated.
        confbridge-lock-in: To lock, or unlock the conference...
        confbridge-lock-out: ...to lock, or unlock the conference.
        demo-moreinfo: Asterisk is an Open Source PBX.  For more information, visit www.asterisk.org.
        digits/1: one
        dir-instr: If this is the person you are looking for press 1 now, otherwise please press star now.
        not a prompt: Hello, world.
        vm-intro: Please leave your message after the tone. When done, hang up or press the pound key.
        """
        let kept = RealPrompts.withPauses(transcriptText: transcript).map(\.name)
        #expect(kept == ["agent-newlocation", "demo-moreinfo", "dir-instr", "vm-intro"])
        // A dotted name inside a sentence is not a pause; the pause after "PBX." is.
        #expect(RealPrompts.withPauses(transcriptText: "x: Visit www.asterisk.org today.").isEmpty)
    }
}
