// The loop's settings as inputs: the config, the headset, the gateway's silence timeout, wake on
// or off, its triggers and routing, the outbox and the hooks. The machine's settings are derived
// from them in one place (`settings`) and handed to the machine in one place (`applySettings`).

import Audio
import ClawvoiceCore
import GatewayClient
import GatewayProtocol
import WakeWord

extension TalkController {
    /// The machine's settings for a config, the wake config (nil: wake off) and whether the
    /// capture is echo-cancelled.
    static func settings(_ c: TalkConfig, wake: WakeConfig?, echo: Bool = false) -> TalkMachine.Settings {
        var s = TalkMachine.Settings()
        s.echoCancelled = echo
        s.silenceTimeoutMs = c.silenceTimeoutMs
        s.voiceDetector = c.voiceDetector
        s.voiceThreshold = c.voiceThreshold
        s.turnModel = c.endOfTurn && c.voiceDetector == .model ? c.turnModel : nil
        s.onceMaxMs = c.onceMaxMs
        s.captureMaxMs = c.captureMaxMs
        s.headset = c.headset
        s.interruptOnSpeech = c.interruptOnSpeech
        s.bargeInMs = c.bargeInMs
        s.bargeInLevelDbfs = c.bargeInLevelDbfs
        s.speakerTailMs = c.speakerTailMs
        s.speakReplies = c.speakReplies
        s.replyTimeoutMs = c.replyTimeoutMs
        s.partsWaitMs = c.partsWaitMs
        s.followUpMs = c.followUpMs
        s.callWakePhrase = c.callWakeWord
        s.stopWordEnabled = c.stopWordModelsDirectory != nil
        if let w = wake {
            s.wakeEnabled = w.enabled
            s.wakeSilenceAfterSpeechMs = w.silenceAfterSpeechMs
            s.wakeTriggerOnlyMs = w.silenceAfterTriggerOnlyMs
            s.wakeMaxCaptureMs = w.maxCaptureMs
            s.wakeDebounceMs = Int64(w.debounceMs)
            s.wakeMinCommandCharacters = w.minCommandCharacters
        }
        return s
    }
}

extension TalkLoop {
    /// The config as the machine sees it: what the models said (the voice detector's threshold,
    /// the end-of-turn model) over what the config file said.
    var effectiveConfig: TalkConfig {
        var c = config
        if let t = ears.voiceModelThreshold { c.voiceThreshold = t }
        if c.endOfTurn, let m = ears.turnModel { c.turnModel = m }
        return c
    }

    /// The only place the machine's settings change: derived from the loop's inputs and fed to
    /// the machine as its `settings` input (which decides nothing at once: no actions).
    func applySettings() {
        let s = TalkController.settings(effectiveConfig, wake: ears.wakeConfig, echo: ears.echoOn(config))
        let actions = machine.handle(.settings(s), nowMs: nowMs)
        assert(actions.isEmpty, "settings are not a decision")
    }

    func apply(_ setting: TalkController.Setting) {
        switch setting {
        case .config(let c):
            config = c
            replies.setCues(c.cues)
            ears.setPreRoll(ms: c.preRollMs)
            applySettings()
        case .headset(let on):
            config.headset = on
            applySettings()
        case .gatewaySilenceTimeout(let ms):
            guard ms != config.silenceTimeoutMs else { return }
            config.silenceTimeoutMs = ms
            applySettings()
            log.log(.info, "talk", "silence timeout from the gateway: \(ms) ms")
        case .enableWake(let wakeConfig, let triggers):
            ears.enableWake(wakeConfig, triggers: triggers)
            applySettings()
        case .disableWake:
            ears.disableWake()
            applySettings()
        case .wakeTriggers(let list):
            ears.setTriggers(list)
        case .wakeRouting(let r):
            ears.setRouting(r)
        case .outbox(let o):
            captures.outbox = o
        case .events(let f):
            onEvent = f
        case .onCallEnd(let f):
            onEndCall = f
        case .onCallStart(let f):
            onStartCall = f
        case .onCallFrame(let f):
            onCallFrame = f
        case .microphone(let audio):
            // The capture loop as a child of this loop: it ends with it (or with audio.stop()).
            let handle = self.handle
            jobs.add { await audio.run(feeding: handle) }
        }
    }
}
