// TalkController's settings for the machine from TalkConfig (moved from TalkMachineTests when
// the machine went to ClawvoiceCore; the machine's half of the silence window stays there).

import ClawvoiceCore
import Testing
@testable import Talk

@Suite struct TalkSettingsTests {
    @Test func theGatewaysSilenceTimeoutWins() {
        // The controller puts the gateway's talk.config silenceTimeoutMs into the settings.
        var config = TalkConfig()
        config.silenceTimeoutMs = 1_500
        let s = TalkController.settings(config, wake: nil)
        #expect(s.silenceTimeoutMs == 1_500)
        #expect(s.voiceDetector == .model)
    }

    @Test func theDefaultsAgree() {
        #expect(TalkMachine.Settings().silenceTimeoutMs == TalkConfig().silenceTimeoutMs)
        #expect(TalkMachine.Settings().voiceDetector == .model)
        #expect(TalkConfig().voiceDetector == .model)
    }
}
