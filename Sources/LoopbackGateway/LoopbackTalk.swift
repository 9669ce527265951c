// The loopback gateway's Talk side: a transcription relay that decodes what it receives
// (having no recogniser, it reports the audio's length and level unless a test supplies the
// text), talk.speak and tts.speak answering with espeak-made clips in the requested format,
// and audio fault injection (corrupt, mislabelled, headerless, empty clips; errors with and
// without fallbackEligible; the methods missing altogether).

import Audio
public import ClawvoiceCore
import Foundation
public import GatewayProtocol
import WebSocketTransport

extension LoopbackGateway {
    /// What the relay asks clients to send.
    public enum RelayMode: Sendable, Equatable {
        case oggOpus
        case pcm16(rateHz: Int)
        case g711MuLaw
        /// No transcription relay: talk.session.* are not offered.
        case disabled
    }

    /// A deliberate failure of the TTS methods.
    public enum AudioFault: Sendable, Equatable {
        case none
        /// Random bytes labelled as the requested format.
        case corruptClip
        /// A WAV clip labelled as MP3.
        case mislabelledClip
        /// Raw PCM with no rate (`outputFormat: "pcm"`).
        case headerlessClip
        case emptyClip
        /// `UNAVAILABLE` with `fallbackEligible: true`.
        case errorFallbackEligible
        /// `UNAVAILABLE` with `fallbackEligible: false` (`synthesis_failed`).
        case errorNotEligible
        /// `UNAVAILABLE` with `fallbackEligible: false` (`invalid_audio_result`).
        case errorInvalidAudioResult
        /// A real Ogg Opus stream of one 20 ms packet, then garbage: decodes to about 13 ms.
        case damagedOggOpus
        /// 2000 bytes of WAV whose header says 100 Hz (10 s at the speaker if trusted).
        case lowRateWAV
        /// A valid 8 kHz WAV far longer than its text could take to say.
        case overlongClip
    }

    /// One relay session as the gateway saw it.
    public struct RelayRecord: Sendable {
        public var sessionId: String
        public var encoding: RelayInputEncoding
        public var sampleRateHz: Int
        public var bytes: [UInt8] = []
        public var timestamps: [Int64] = []
        public var base64Lengths: [Int] = []
        public var closed = false
        /// What the relay decoded, at `decoded.format`.
        public var decoded: PCMBuffer?
        public var transcript: String?
        public var decodeError: String?
    }

    static let talkSpeakKeys: Set<String> = ["text", "voiceId", "modelId", "outputFormat", "speed", "rateWpm", "stability",
        "similarity", "style", "speakerBoost", "seed", "normalize", "language", "latencyTier"]

    func talkMethod(_ req: RequestFrame, _ p: JSONValue, _ conn: Connection) -> Bool {
        switch req.method {
        case "talk.session.create", "talk.session.appendAudio", "talk.session.close":
            guard configuration.relay != .disabled else { return false }
            if let e = schemaRefusal(req.method, p) ?? ownerRefusal(p) {
                fail(req.id, e, to: conn.id)
                return true
            }
            relayMethod(req, p, conn)
            return true
        case "talk.speak", "tts.speak":
            speakMethod(req, p, conn)
            return true
        case "talk.config":
            if let e = schemaRefusal(req.method, p) {
                fail(req.id, e, to: conn.id)
                return true
            }
            reply(req.id, talkConfigPayload, to: conn.id)
            return true
        default:
            return false
        }
    }

    private func relayMethod(_ req: RequestFrame, _ p: JSONValue, _ conn: Connection) {
        switch req.method {
        case "talk.session.create":
            guard p["mode"]?.stringValue == "transcription", p["transport"]?.stringValue == "gateway-relay",
                  p["brain"]?.stringValue == "none" else {
                fail(req.id, ErrorShape(code: "INVALID_REQUEST", message: "transcription requires transport gateway-relay and brain none"), to: conn.id)
                return
            }
            if configuration.relayUnavailable {
                fail(req.id, ErrorShape(code: "UNAVAILABLE", message: "transcription provider unavailable",
                                        details: ["talkIssue": TalkIssue(code: "realtime_unavailable", message: "no transcription provider is configured",
                                                                         phase: "request").json]), to: conn.id)
                return
            }
            let id = "relay-" + String(UUID().uuidString.prefix(8)).lowercased()
            let (encoding, rate): (RelayInputEncoding, Int)
            switch configuration.relay {
            case .oggOpus: (encoding, rate) = (.oggOpus, 16_000)
            case .pcm16(let r): (encoding, rate) = (.pcm16, r)
            case .g711MuLaw: (encoding, rate) = (.g711MuLaw, 8_000)
            case .disabled: return
            }
            relays[id] = RelayRecord(sessionId: id, encoding: encoding, sampleRateHz: rate)
            relayOrder.append(id)
            relayOwners[id] = conn.id
            let expires = Int64(Date().timeIntervalSince1970 * 1000) + 30 * 60_000
            reply(req.id, TalkSessionInfo(sessionId: id, inputEncoding: encoding, inputSampleRateHz: rate, transcriptionSessionId: id,
                                          provider: "loopback", expiresAt: .number(Double(expires))).payload, to: conn.id)
        case "talk.session.appendAudio":
            guard let id = p["sessionId"]?.stringValue, var r = relays[id], !r.closed else {
                fail(req.id, ErrorShape(code: "INVALID_REQUEST", message: "unknown or closed talk session"), to: conn.id)
                return
            }
            guard let b64 = p["audioBase64"]?.stringValue, b64.count <= 512 * 1024, let data = Data(base64Encoded: b64) else {
                fail(req.id, ErrorShape(code: "INVALID_REQUEST", message: "audioBase64 missing, not base64 or over 512 KiB"), to: conn.id)
                return
            }
            if let t = p["timestamp"], t.intValue == nil {
                fail(req.id, ErrorShape(code: "INVALID_REQUEST", message: "timestamp must be an integer number of milliseconds"), to: conn.id)
                return
            }
            r.bytes += data
            r.timestamps.append(p["timestamp"]?.intValue ?? -1)
            r.base64Lengths.append(b64.count)
            relays[id] = r
            reply(req.id, ["ok": true], to: conn.id)
        default:  // close
            guard let id = p["sessionId"]?.stringValue, var r = relays[id] else {
                fail(req.id, ErrorShape(code: "INVALID_REQUEST", message: "unknown talk session"), to: conn.id)
                return
            }
            if r.closed { reply(req.id, ["ok": true], to: conn.id); return }
            r.closed = true
            let decodeStart = ContinuousClock.now
            defer {
                let d = ContinuousClock.now - decodeStart
                serviceMs += Double(d.components.seconds) * 1000 + Double(d.components.attoseconds) / 1e15
            }
            do {
                let pcm: PCMBuffer
                switch r.encoding {
                case .oggOpus: pcm = try r.bytes.isEmpty ? PCMBuffer(format: .voice) : ClipDecoder.decode(r.bytes, outputFormat: "opus", mimeType: "audio/ogg", fileExtension: ".opus")
                case .pcm16: pcm = PCMBuffer(format: AudioFormat(sampleRateHz: r.sampleRateHz, channels: 1), littleEndianBytes: r.bytes)
                default: pcm = PCMBuffer(format: AudioFormat(sampleRateHz: r.sampleRateHz, channels: 1), samples: G711.muLaw(decode: r.bytes))
                }
                r.decoded = pcm
            } catch {
                r.decodeError = "\(error)"
            }
            let text: String
            if let supplied = nextTranscripts.first {
                nextTranscripts.removeFirst()
                text = supplied
            } else if let pcm = r.decoded, pcm.durationMilliseconds > 0 {
                let db = pcm.rms > 0 ? 20 * log10(pcm.rms) : -120
                text = String(format: "audio %.2f s at %.0f dBFS", pcm.durationMilliseconds / 1000, db)
            } else {
                text = ""
            }
            r.transcript = text
            relays[id] = r
            emit("talk.event", TalkTranscriptEvent(sessionId: id, text: text, isFinal: true).payload, to: conn.id, seq: true)
            reply(req.id, ["ok": true], to: conn.id)
        }
    }

    private func speakMethod(_ req: RequestFrame, _ p: JSONValue, _ conn: Connection) {
        guard let text = p["text"]?.stringValue, !text.trimmingCharacters(in: .whitespaces).isEmpty else {
            fail(req.id, ErrorShape(code: "INVALID_REQUEST", message: "\(req.method): text is required"), to: conn.id)
            return
        }
        let allowed = req.method == "talk.speak" ? Self.talkSpeakKeys : ["text"]
        if let extra = p.objectValue?.keys.first(where: { !allowed.contains($0) }) {
            fail(req.id, ErrorShape(code: "INVALID_REQUEST", message: "invalid \(req.method) params: unexpected property \(extra)"), to: conn.id)
            return
        }
        speakRequests.append((req.method, p))
        switch audioFault {
        case .errorFallbackEligible:
            fail(req.id, ErrorShape(code: "UNAVAILABLE", message: "talk provider not configured",
                                    details: ["reason": "talk_unconfigured", "fallbackEligible": true]), to: conn.id)
            return
        case .errorNotEligible:
            fail(req.id, ErrorShape(code: "UNAVAILABLE", message: "synthesis failed",
                                    details: ["reason": "synthesis_failed", "fallbackEligible": false]), to: conn.id)
            return
        case .errorInvalidAudioResult:
            fail(req.id, ErrorShape(code: "UNAVAILABLE", message: "talk provider returned invalid audio",
                                    details: ["reason": "invalid_audio_result", "fallbackEligible": false]), to: conn.id)
            return
        default:
            break
        }
        let requested = p["outputFormat"]?.stringValue ?? (req.method == "talk.speak" ? configuration.talkSpeakDefaultFormat : configuration.ttsSpeakFormat)
        let fault = audioFault
        let server = self
        let rate = p["rateWpm"]?.intValue.map(Int.init) ?? 175
        let id = req.id, connection = conn.id
        // espeak-ng blocks: synthesise on a dispatch queue, off the actor and the cooperative pool,
        // and answer when done (a child of the runner waits for it).
        spawn {
            let (result, spent) = await withCheckedContinuation { (c: CheckedContinuation<(Result<SpeakResult, ErrorShape>, Duration), Never>) in
                DispatchQueue.global().async {
                    let started = ContinuousClock.now
                    let result = LoopbackGateway.makeClip(text: text, format: requested, rateWpm: rate, fault: fault)
                    c.resume(returning: (result, ContinuousClock.now - started))
                }
            }
            await server.finishSpeak(id, result, to: connection, spentMs: Double(spent.components.attoseconds) / 1e15 + Double(spent.components.seconds) * 1000)
        }
    }

    func finishSpeak(_ id: String, _ result: Result<SpeakResult, ErrorShape>, to conn: ConnectionID, spentMs: Double = 0) {
        serviceMs += spentMs
        switch result {
        case .success(let r): reply(id, (try? JSONValue(encoding: r)) ?? [:], to: conn)
        case .failure(let e): fail(id, e, to: conn)
        }
    }

    /// An espeak-ng clip in `format` (`pcm_<rate>`, `wav`, `opus`, `mp3_*`), with `fault` applied.
    static func makeClip(text: String, format: String, rateWpm: Int, fault: AudioFault) -> Result<SpeakResult, ErrorShape> {
        var settings = VoiceSettings()
        settings.rateWpm = rateWpm
        let speech: PCMBuffer
        do { speech = try SpeechSynthesizer.synthesize(text, settings: settings) } catch {
            return .failure(ErrorShape(code: "UNAVAILABLE", message: "synthesis failed: \(error)",
                                       details: ["reason": "synthesis_failed", "fallbackEligible": false]))
        }
        var bytes: [UInt8]
        var outputFormat = format
        var mime: String
        var ext: String
        let lower = format.lowercased()
        do {
            if lower.hasPrefix("pcm_"), let rate = Int(lower.dropFirst(4)) {
                bytes = PCMBuffer(format: AudioFormat(sampleRateHz: rate, channels: 1), samples: try resample(speech, to: rate)).bytes
                (mime, ext) = ("audio/pcm", ".pcm")
            } else if lower == "opus" || lower.hasPrefix("opus_") {
                let voice = PCMBuffer(format: .voice, samples: try resample(speech, to: 16_000))
                bytes = try OggOpusVoiceNote.encode(voice, bitrate: 32_000)
                (outputFormat, mime, ext) = ("opus", "audio/ogg", ".opus")
            } else if lower.hasPrefix("mp3"), let mp3 = mp3(speech) {
                bytes = mp3
                (mime, ext) = ("audio/mpeg", ".mp3")
            } else {
                bytes = WAVFile.encode(speech)
                (outputFormat, mime, ext) = ("wav", "audio/wav", ".wav")
            }
        } catch {
            return .failure(ErrorShape(code: "UNAVAILABLE", message: "clip encoding failed: \(error)",
                                       details: ["reason": "invalid_audio_result", "fallbackEligible": false]))
        }
        switch fault {
        case .corruptClip:
            var g = SystemRandomNumberGenerator()
            bytes = (0..<max(bytes.count / 4, 512)).map { _ in UInt8.random(in: 0...255, using: &g) }
            if outputFormat.hasPrefix("pcm_") { outputFormat = "mp3_44100_128"; mime = "audio/mpeg"; ext = ".mp3" }
        case .mislabelledClip:
            bytes = Array("not audio at all, just a label that says mp3".utf8) + [UInt8](repeating: 0x55, count: 2048)
            (outputFormat, mime, ext) = ("mp3_44100_128", "audio/mpeg", ".mp3")
        case .headerlessClip:
            (outputFormat, mime, ext) = ("pcm", "audio/pcm", ".pcm")
        case .emptyClip:
            bytes = []
        case .damagedOggOpus:
            let head = PCMBuffer(format: .voice, samples: Array(((try? resample(speech, to: 16_000)) ?? []).prefix(320)))
            var g = SystemRandomNumberGenerator()
            bytes = ((try? OggOpusVoiceNote.encode(head, bitrate: 32_000)) ?? []) + (0..<4096).map { _ in UInt8.random(in: 0...255, using: &g) }
            (outputFormat, mime, ext) = ("opus", "audio/ogg", ".opus")
        case .lowRateWAV:
            var wav = WAVFile.encode(PCMBuffer(format: AudioFormat(sampleRateHz: 8_000, channels: 1), samples: [Int16](repeating: 1000, count: 1000)))
            wav.replaceSubrange(24..<32, with: [100, 0, 0, 0, 200, 0, 0, 0])   // sample rate 100 Hz, byte rate 200
            bytes = wav
            (outputFormat, mime, ext) = ("wav", "audio/wav", ".wav")
        case .overlongClip:
            let frames = Int(ClipPlayability.maximumMs(characters: text.count) / 1000 + 2) * 8_000
            let tone = (0..<frames).map { Int16(8000 * sin(Double($0) * 0.3)) }
            bytes = WAVFile.encode(PCMBuffer(format: AudioFormat(sampleRateHz: 8_000, channels: 1), samples: tone))
            (outputFormat, mime, ext) = ("wav", "audio/wav", ".wav")
        default:
            break
        }
        return .success(SpeakResult(audioBase64: Data(bytes).base64EncodedString(), provider: "loopback-espeak",
                                    outputFormat: outputFormat, voiceCompatible: false, mimeType: mime, fileExtension: ext))
    }

    static func resample(_ pcm: PCMBuffer, to rate: Int) throws -> [Int16] {
        let mono = pcm.mono()
        guard mono.format.sampleRateHz != rate else { return mono.samples }
        let r = try Resampler(from: mono.format.sampleRateHz, to: rate, channels: 1)
        return r.process(mono.samples) + r.flush()
    }

    /// MP3 through the ffmpeg command when it is installed (the loopback has no MP3 encoder of its own).
    static func mp3(_ pcm: PCMBuffer) -> [UInt8]? {
        let ffmpeg = ["/usr/bin/ffmpeg", "/usr/local/bin/ffmpeg"].first { FileManager.default.isExecutableFile(atPath: $0) }
        guard let ffmpeg else { return nil }
        let dir = FileManager.default.temporaryDirectory.appendingPathComponent("cv-mp3-\(UUID().uuidString.prefix(8))").path
        try? FileManager.default.createDirectory(atPath: dir, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let wav = dir + "/in.wav", out = dir + "/out.mp3"
        _ = FileManager.default.createFile(atPath: wav, contents: Data(WAVFile.encode(pcm)))
        let p = Process()
        p.executableURL = URL(fileURLWithPath: ffmpeg)
        p.arguments = ["-loglevel", "error", "-y", "-i", wav, "-ar", "44100", "-b:a", "128k", out]
        p.standardOutput = FileHandle.nullDevice
        p.standardError = FileHandle.nullDevice
        guard (try? p.run()) != nil else { return nil }
        p.waitUntilExit()
        guard p.terminationStatus == 0, let d = FileManager.default.contents(atPath: out) else { return nil }
        return Array(d)
    }
}
