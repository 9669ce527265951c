// `clawvoice demo`: the whole loop on this machine against the built-in loopback gateway:
// pair, say something into a virtual microphone, let the gateway invoke talk.ptt.once,
// stream the capture to the relay, and speak the echoed answer; then a streamed reply, a
// forced fallback, a wake word said into the microphone, and a session switch.

import Audio
import Daemon
import ClawvoiceCore
import Foundation
public import GatewayClient
import GatewayCrypto
import GatewayProtocol
import LoopbackGateway
import NodeRuntime
import Realtime
import Store
import Talk

public enum Demo {
    static let command = CLI.Command(name: "demo", abstract: "The whole loop on this machine: pair, push-to-talk, hear the answer.",
                usage: "clawvoice demo [--message TEXT] [--out FILE.wav]",
                details: """
                Needs no OpenClaw install. A built-in loopback gateway approves pairing by itself; espeak-ng says
                the message into a virtual microphone; the gateway invokes talk.ptt.once; the capture streams to
                the gateway's relay as G.711 µ-law at 8 kHz (what the real relay takes); the echoed answer is spoken with a talk.speak clip.
                With a sound server running you hear the answer; without one the demo starts a private
                PulseAudio and writes what its speaker played to a WAV file.

                Options:
                  --message TEXT   what to say (default "Hello from clawvoice")
                  --out FILE.wav   where the private speaker's audio goes (default ./clawvoice-demo.wav)
                """, flags: ["--message": true, "--out": true], maxPositionals: 0)

    static func run(_ p: CLI.Parsed, config: ClawConfig, paths: RuntimePaths, log: LogSink, environment: [String: String]) async throws -> Int32 {
        // The demo's own lines tell the story; only warnings from the machinery below.
        let quiet = LogSink.stderr(minimum: p.logLevel ?? .warning)
        return try await Demo.run(message: p.flags["--message"] ?? "Hello from clawvoice", wavPath: p.flags["--out"],
                                  log: quiet, say: { CLI.say($0) })
    }

    public static func run(message: String, wavPath: String? = nil, log: LogSink, say: @escaping @Sendable (String) -> Void) async throws -> Int32 {
        let dir = FileManager.default.temporaryDirectory.appendingPathComponent("clawvoice-demo-\(UUID().uuidString.prefix(8))").path
        defer { try? FileManager.default.removeItem(atPath: dir) }
        var gc = LoopbackGateway.Configuration()
        gc.autoApprove = true
        gc.auth = .token("demo-token")
        gc.realtimeRelay = true  // step 6: a live call over the gateway's relay
        let gateway = LoopbackGateway(configuration: gc)
        try await gateway.start()
        let url = await gateway.url
        say("Loopback gateway on \(url): it approves pairing by itself, transcribes nothing (it reports")
        say("the length and level of what it hears), echoes what it is told, and speaks with espeak-ng.")

        // Audio: the user's sound server with a virtual microphone, or a private PulseAudio.
        let privateServer: PrivatePulseServer?
        var virtualMicModule: String?
        var micSink = PrivatePulseServer.microphoneSink
        var source = PrivatePulseServer.microphone
        var sink: String? = PrivatePulseServer.speaker
        if await soundServerAnswers(), let module = loadVirtualMicrophone() {
            privateServer = nil
            virtualMicModule = module
            micSink = "clawvoice_demo_mic"
            source = "clawvoice_demo_mic.monitor"
            sink = nil
            say("Sound: your sound server, with a virtual microphone (clawvoice_demo_mic); the reply plays on your speakers.")
        } else {
            privateServer = try await PrivatePulseServer()
            say("Sound: no sound server here, so a private PulseAudio with a virtual microphone and speaker.")
        }
        defer {
            if let m = virtualMicModule { unloadModule(m) }
            privateServer?.stop()
        }
        let server = privateServer?.server

        var config = ClawConfig()
        config.node.displayName = "clawvoice demo"
        config.gateway.url = url
        config.gateway.token = "demo-token"
        config.audio.source = source
        config.audio.sink = sink
        config.talk.calls = true
        let paths = RuntimePaths(configFile: "", configExplicit: false, stateDir: dir, controlSocket: dir + "/control.sock")
        let node = try NodeDaemon(paths: paths, config: config, log: log, pulseServer: server)
        // The node's services run as a child of this scope; leaving it cancels and awaits them.
        async let running: Void = node.run(controlSocket: false, signals: false)
        if case .failure(let s) = await node.link.waitForBoth(timeout: .seconds(20)) {
            say("Demo failed: \(s.role) is \(s.state.rawValue): \(s.detail)")
            node.stop()
            await gateway.stop()
            return 1
        }
        let store = try openStore(paths)
        say("Paired: node and operator connected; device tokens stored (\(try store.tokens(gateway: node.link.record.name).map(\.role).sorted().joined(separator: ", "))).")
        let deadline = ContinuousClock.now + .seconds(10)
        while node.audio.captureStatus != "running" && ContinuousClock.now < deadline { try await Task.sleep(for: .milliseconds(50)) }
        guard node.audio.captureStatus == "running" else {
            say("Demo failed: the microphone did not start (\(node.audio.captureStatus))")
            node.stop()
            await gateway.stop()
            return 1
        }

        // Say the message into the virtual microphone while the gateway asks for talk.ptt.once.
        let utterance = try SpeechSynthesizer.synthesize(message, settings: VoiceSettings())
        let micConnection = PulseConnection(server: server, clientName: "clawvoice-demo-voice")
        defer { micConnection.close() }
        let mic = PulsePlayback(connection: micConnection, sink: micSink)
        let tap = server.map { PulseConnection(server: $0, clientName: "clawvoice-demo-tap") }
        defer { tap?.close() }
        let recording = try await startRecording(tap)
        // What the private speaker plays, collected by a child of this scope until the capture stops.
        async let recorded = record(recording)

        say("→ gateway invokes talk.ptt.once; saying \"\(message)\" into the microphone…")
        async let invoke = gateway.invoke(command: "talk.ptt.once", paramsJSON: "{}", timeoutMs: 20_000)
        try await Task.sleep(for: .milliseconds(200))
        _ = try await mic.play(utterance)
        let result = try await invoke
        guard result.ok, let payload = result.payload else {
            say("Demo failed: talk.ptt.once → \(result.error?.message ?? "no result")")
            node.stop()
            await gateway.stop()
            return 1
        }
        say("← talk.ptt.once: \(payload)")
        if let relay = await gateway.relayRecords().last {
            say("  the relay received \(relay.base64Lengths.count) \(relay.encoding == .oggOpus ? "Ogg Opus" : relay.encoding == .g711MuLaw ? "G.711 µ-law 8 kHz" : relay.encoding.wireName) appends (\(relay.bytes.count) bytes) and decoded \(String(format: "%.2f", (relay.decoded?.durationMilliseconds ?? 0) / 1000)) s")
        }
        let spoke = ContinuousClock.now + .seconds(30)
        while await node.talk.lastSpeech == nil && ContinuousClock.now < spoke { try await Task.sleep(for: .milliseconds(50)) }
        if let reply = await gateway.requests(method: "chat.send").last?.params?["message"]?.stringValue {
            say("  chat.send → \"\(reply)\"")
        }
        guard let speech = await node.talk.lastSpeech else {
            say("Demo failed: no reply was spoken within 30 s")
            node.stop()
            await gateway.stop()
            return 1
        }
        say("← reply spoken via \(speech.engine)\(speech.provider.map { " (\($0), \(speech.outputFormat ?? "?"))" } ?? ""): \(String(format: "%.2f", speech.durationMs / 1000)) s")

        // 2. A streamed multi-sentence reply: the loopback has no recogniser, so the demo scripts
        //    what it "heard"; the echo streams back sentence by sentence and speaking starts early.
        let question = "Tell me three things. First, the weather. Second, the news. Third, a joke please."
        await gateway.supplyTranscript(question)
        say("→ talk.ptt.once again; the relay is told it heard: \"\(question)\"")
        let firstReply = await node.talk.lastReply
        async let second = gateway.invoke(command: "talk.ptt.once", paramsJSON: "{}", timeoutMs: 20_000)
        try await Task.sleep(for: .milliseconds(200))
        _ = try await mic.play(utterance)
        _ = try await second
        if let stream = await waitForReply(node.talk, after: firstReply, timeout: .seconds(30)) {
            let deadline = ContinuousClock.now + .seconds(30)
            while await !stream.isFinished && ContinuousClock.now < deadline { try await Task.sleep(for: .milliseconds(50)) }
            await stream.done()
            let sentences = await stream.sentences
            say("← streamed reply, \(sentences.count) sentences spoken as they arrived:")
            for s in sentences { say("    • \(s)") }
        }

        // 3. One forced fallback: the gateway's TTS fails (fallbackEligible), espeak-ng speaks instead.
        await gateway.setAudioFault(.errorFallbackEligible)
        let fallback = await node.speech.speak("This sentence is spoken on the device, because the gateway's voice failed.", route: .talkSpeak)
        say("← forced fallback: spoken via \(fallback.engine) because \(fallback.fallbackReason ?? "?")")
        await gateway.setAudioFault(.none)

        // 4. A wake word: said into the microphone inside a sentence, no button, no invoke.
        if let status = await node.talk.wakeStatus, status.listening.contains("openclaw") {
            let sentence = "hey, openclaw, what is the weather like"
            await gateway.supplyTranscript("hey openclaw what is the weather like")
            let sendsBefore = await gateway.requests(method: "chat.send").count
            say("→ saying \"\(sentence)\" into the microphone (wake words: \(status.listening.joined(separator: ", ")))")
            let words = try SpeechSynthesizer.synthesize(sentence, settings: VoiceSettings())
            _ = try await mic.play(PCMBuffer(format: words.format, samples: words.samples
                                             + [Int16](repeating: 0, count: words.format.sampleRateHz * words.format.channels * 3)))
            // The sentence and 3 s of silence have played: a detection has happened by now, or
            // none will; a turn that was heard is sent once its capture ends (within 20 s).
            let heard = (await node.talk.wakeStatus?.detections ?? 0) > (status.detections)
            let deadline = ContinuousClock.now + .seconds(heard ? 20 : 0)
            while await gateway.requests(method: "chat.send").count == sendsBefore && ContinuousClock.now < deadline {
                try await Task.sleep(for: .milliseconds(50))
            }
            let after = await node.talk.wakeStatus
            if let sent = await gateway.requests(method: "chat.send").dropFirst(sendsBefore).first {
                say("← wake word \"\(after?.lastPhrase ?? "?")\" heard; chat.send → \"\(sent.params?["message"]?.stringValue ?? "")\" (trigger words stripped)")
            } else {
                say("  the wake word was not heard this time (detections: \(after?.detections ?? 0), last: \(after?.lastOutcome ?? "none"))")
            }
        } else {
            say("  (wake words skipped: no trained models; `make wake-model TRIGGER=openclaw` trains one)")
        }

        // 5. A session switch cuts a reply short.
        async let long = node.speech.speak("This is a long answer that goes on and on, about many things, far longer than anyone would want to hear in one go.", route: .local)
        try await Task.sleep(for: .milliseconds(1200))
        let switchedAt = ContinuousClock.now
        await node.talk.switchSession(to: "agent:main:demo-kitchen")
        let cut = await long
        let took = ContinuousClock.now - switchedAt
        say("← session switched to agent:main:demo-kitchen: the reply was \(cut.outcome.rawValue) (\(String(format: "%.1f", took / .milliseconds(1))) ms to stop)")
        // 6. A live call: the loopback's realtime relay answers each utterance with it.
        if let calls = node.calls {
            say("→ clawvoice call: a live conversation over the gateway's realtime relay")
            let started = await calls.control("call", origin: "demo")
            let connectBy = ContinuousClock.now + .seconds(10)
            while await calls.service.status.phase != "connected" && ContinuousClock.now < connectBy { try await Task.sleep(for: .milliseconds(50)) }
            let status = await calls.service.status
            if status.phase == "connected" {
                say("← call \(status.callId ?? "?") connected over \(status.path ?? "?") (session \(status.sessionKey ?? "?"))")
                _ = try await mic.play(PCMBuffer(format: utterance.format, samples: utterance.samples + [Int16](repeating: 0, count: utterance.format.sampleRateHz)))
                let answerBy = ContinuousClock.now + .seconds(10)
                while (await gateway.realtimeRelayRecords.last?.playedMs ?? 0) == 0 && ContinuousClock.now < answerBy { try await Task.sleep(for: .milliseconds(50)) }
                try await Task.sleep(for: .seconds(1))
                if let r = await gateway.realtimeRelayRecords.last {
                    say("  the relay heard \(String(format: "%.1f", Double(r.heardVoiceMs) / 1000)) s of voice in \(r.utterances) utterance(s) and answered with \(String(format: "%.1f", Double(r.playedMs) / 1000)) s of audio")
                }
                _ = await calls.control("hangup")
                let end = await calls.service.status.lastEnd
                say("← clawvoice hangup: the call ended (\(end?.cause ?? "?"))")
            } else {
                say("  the call did not connect (\(started), phase \(status.phase))")
            }
        }

        if let recording {
            try? await Task.sleep(for: .milliseconds(300))
            recording.stop()
            let pcm = PCMBuffer(format: .voice, samples: await recorded)
            let path = wavPath ?? FileManager.default.currentDirectoryPath + "/clawvoice-demo.wav"
            if FileManager.default.createFile(atPath: path, contents: Data(WAVFile.encode(pcm))) {
                say("  what the speaker played is in \(path) (\(String(format: "%.2f", pcm.durationMilliseconds / 1000)) s)")
            }
        }
        node.stop()
        try await running
        await gateway.stop()
        say("Done.")
        return 0
    }

    /// The reply stream of the turn after `previous` was spoken.
    static func waitForReply(_ talk: TalkController, after first: ReplyStream?, timeout: Duration) async -> ReplyStream? {
        let deadline = ContinuousClock.now + timeout
        while ContinuousClock.now < deadline {
            if let r = await talk.lastReply, r !== first { return r }
            try? await Task.sleep(for: .milliseconds(50))
        }
        return nil
    }

    /// Starts capturing the private speaker's monitor (nil without a private server).
    static func startRecording(_ connection: PulseConnection?) async throws -> PulseCapture? {
        guard let connection else { return nil }
        let c = PulseCapture(connection: connection, source: PrivatePulseServer.speaker + ".monitor")
        try await c.start()
        return c
    }

    /// The samples `capture` delivers until it is stopped (or the caller's scope is left).
    static func record(_ capture: PulseCapture?) async -> [Int16] {
        guard let capture else { return [] }
        var samples: [Int16] = []
        for await f in capture.frames { samples += f.pcm.samples }
        return samples
    }

    /// `pactl load-module module-null-sink`: a virtual microphone on the user's server. Returns the module index.
    static func loadVirtualMicrophone() -> String? {
        let out = pactl(["load-module", "module-null-sink", "sink_name=clawvoice_demo_mic", "rate=16000", "channels=1",
                         "sink_properties=device.description=clawvoice-demo-microphone"])
        guard let index = out?.trimmingCharacters(in: .whitespacesAndNewlines), Int(index) != nil else { return nil }
        return index
    }

    static func unloadModule(_ index: String) { _ = pactl(["unload-module", index]) }

    static func pactl(_ args: [String]) -> String? {
        guard let path = ["/usr/bin/pactl", "/usr/local/bin/pactl"].first(where: { FileManager.default.isExecutableFile(atPath: $0) }) else { return nil }
        let p = Process()
        p.executableURL = URL(fileURLWithPath: path)
        p.arguments = args
        let pipe = Pipe()
        p.standardOutput = pipe
        p.standardError = FileHandle.nullDevice
        guard (try? p.run()) != nil else { return nil }
        p.waitUntilExit()
        guard p.terminationStatus == 0 else { return nil }
        return String(decoding: pipe.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
    }
}
