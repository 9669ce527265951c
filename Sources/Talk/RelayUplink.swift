// Streams one capture into the gateway's transcription relay while it is being spoken:
// talk.session.create, then appendAudio in the encoding the relay named (an Ogg Opus stream,
// PCM16 or G.711 µ-law), about 100 ms a call, at most 4 calls in flight, whole Ogg pages per
// call; close, then wait up to 5 s for the final transcript on talk.event. The owner runs `run()`
// as a child task (the talk loop's capture executor): it opens the session and is the one sender;
// an uplink nobody runs does both in `finish()`.

import Audio
public import ClawvoiceCore
import Foundation
public import GatewayClient
public import GatewayProtocol

public actor RelayUplink {
    /// How the stream came out (`RelayOutcome`, in ClawvoiceCore, for the talk machine).
    public typealias Outcome = RelayOutcome

    public struct Limits: Sendable {
        public var batchMs = 100
        public var maxInFlight = 4
        public var maxBase64Bytes = 512 * 1024
        public var transcriptWaitMs: Int64 = 5_000
        public init() {}
    }

    /// The input encoder for the relay's contract.
    enum Encoder {
        case ogg(OggOpusPacketWriter)
        case pcm(Resampler?)
        case muLaw(Resampler)
    }

    private let channel: any OperatorChannel
    private let sessionKey: String?
    private let limits: Limits
    private let log: LogSink
    private let opusBitrate: Int
    private let opusComplexity: Int

    private var info: TalkSessionInfo?
    private var failure: String?
    private var encoder: Encoder?
    private var waitingFrames: [PCMBuffer] = []
    private var pendingBytes: [UInt8] = []
    private var pendingStartMs: Int64?
    private var pendingAudioMs = 0
    private var capturedMs: Int64 = 0
    private var queue: [TalkAppendAudioParams] = []
    private var inFlight = 0
    private var idleWaiters: [CheckedContinuation<Void, Never>] = []
    private var finalTranscript: String?
    private var transcriptArrived = false
    private var transcriptWaiters: [CheckedContinuation<Void, Never>] = []
    /// talk.session.create has begun / is over, and who waits for it to be over.
    private var createStarted = false
    private var createDone = false
    private var createWaiters: [CheckedContinuation<Void, Never>] = []
    /// A `run()` is the sender: `pump` wakes it. Without one, `finish` sends.
    private var running = false
    private let work = WakeLatch()
    /// finish or cancel is through: `run()` returns.
    private var ended = false
    private var closed = false
    /// Calls made, for tests and the bench: (timestamp, base64 length).
    public private(set) var sentCalls: [(Int64, Int)] = []
    public private(set) var maxInFlightSeen = 0
    /// When the last appendAudio call left, for `stop → last uplink call` figures.
    public private(set) var lastSendAt: ContinuousClock.Instant?

    public init(channel: any OperatorChannel, sessionKey: String?, limits: Limits = Limits(), log: LogSink,
                opusBitrate: Int = 20_000, opusComplexity: Int = 5) {
        self.channel = channel
        self.sessionKey = sessionKey
        self.limits = limits
        self.log = log
        self.opusBitrate = opusBitrate
        self.opusComplexity = opusComplexity
    }

    public var sessionId: String? { info?.sessionId }
    public var encoding: RelayInputEncoding? { info?.inputEncoding }

    /// Nothing to do before the first frame: the relay session opens in `run()` (or, for an
    /// uplink nobody runs, in `finish()`); frames appended meanwhile wait for it.
    public func start() {}

    /// Opens the relay session, then sends each batch as it is queued, until `finish` or `cancel`
    /// is through or the task is cancelled. Run by the uplink's owner as a child task.
    public func run() async {
        guard !createStarted else { return }
        running = true
        defer {
            running = false
            wakeIdle()  // a finish waiting for calls a cancelled run will not send
        }
        await create()
        while !Task.isCancelled {
            if !queue.isEmpty && failure == nil {
                await drain()
                continue
            }
            if ended || failure != nil { break }
            await work.wait()
        }
    }

    private func create() async {
        createStarted = true
        defer {
            createDone = true
            let waiters = createWaiters
            createWaiters.removeAll()
            for w in waiters { w.resume() }
        }
        let methods = await channel.advertisedMethods()
        if !methods.isEmpty && !methods.contains(GatewayMethod.talkSessionCreate) {
            fail("the gateway offers no transcription relay")
            return
        }
        do {
            // Sessionless: "Transcription-only sessions without a key remain sessionless and do
            // not select a default chat" (session-ownership.md); chat.send names the turn's session,
            // and a bare "main" here is refused by multi-agent gateways (issue 26, D2).
            let params = try JSONValue(encoding: TalkSessionCreateParams(sessionKey: nil))
            let result = try await channel.request(GatewayMethod.talkSessionCreate, params: params, timeoutMs: 10_000)
            guard let i = TalkSessionInfo(payload: result) else {
                fail("talk.session.create returned no session id")
                return
            }
            if failure != nil {
                // Cancelled while the session was being created: close it, or it is left open.
                _ = try? await channel.request(GatewayMethod.talkSessionClose, params: ["sessionId": .string(i.sessionId)], timeoutMs: 2_000)
                return
            }
            switch i.inputEncoding {
            case .oggOpus:
                encoder = .ogg(try OggOpusPacketWriter(sampleRateHz: 16_000, channels: 1, bitrate: opusBitrate, complexity: opusComplexity,
                                                       pageMilliseconds: limits.batchMs))
            case .pcm16:
                encoder = .pcm(i.inputSampleRateHz == 16_000 ? nil : try Resampler(from: 16_000, to: i.inputSampleRateHz, channels: 1))
            case .g711MuLaw:
                encoder = .muLaw(try Resampler(from: 16_000, to: i.inputSampleRateHz, channels: 1))
            case .unknown(let name):
                fail("the relay asks for an encoding clawvoice does not speak (\(name))")
                return
            }
            info = i
            log.log(.debug, "uplink", "relay \(i.sessionId)\(i.provider.map { " (\($0))" } ?? ""): \(i.inputEncoding.wireName) at \(i.inputSampleRateHz) Hz")
            let early = waitingFrames
            waitingFrames.removeAll()
            for f in early { encode(f) }
            if closed { flush(force: true) }
        } catch {
            fail(Self.createFailure(error))
        }
    }

    /// Why talk.session.create failed, one line; a `details.talkIssue` is named by its code.
    static func createFailure(_ error: any Error) -> String {
        if case GatewayRequestError.failed(let shape) = error, let issue = TalkIssue(details: shape.details) {
            return "no transcription relay (\(shape.code), talk issue \(issue))"
        }
        return isMethodUnavailable(error) ? "no transcription relay (\(error))" : "talk.session.create failed: \(error)"
    }

    private func fail(_ reason: String) {
        if failure == nil { failure = reason }
        waitingFrames.removeAll()
        queue.removeAll()
        wakeIdle()
        transcriptArrived = true
        wakeTranscript()
    }

    /// One 20 ms frame of 16 kHz mono capture.
    public func append(_ frame: PCMBuffer) {
        guard failure == nil, !closed else { return }
        guard info != nil else {
            waitingFrames.append(frame)
            return
        }
        encode(frame)
    }

    private func encode(_ frame: PCMBuffer) {
        if pendingStartMs == nil { pendingStartMs = capturedMs }
        capturedMs += Int64(frame.durationMilliseconds.rounded())
        pendingAudioMs += Int(frame.durationMilliseconds.rounded())
        do {
            switch encoder {
            case .ogg(let w): pendingBytes += try w.append(frame.samples)
            case .pcm(let r): pendingBytes += PCMBuffer(format: .voice, samples: r?.process(frame.samples) ?? frame.samples).bytes
            case .muLaw(let r): pendingBytes += G711.muLaw(encode: r.process(frame.samples))
            case nil: return
            }
        } catch {
            fail("encoding the uplink failed: \(error)")
            return
        }
        if pendingAudioMs >= limits.batchMs { flush(force: false) }
    }

    private func flush(force: Bool) {
        guard let info, !pendingBytes.isEmpty || force else { return }
        if pendingBytes.isEmpty { return }
        let start = pendingStartMs ?? capturedMs
        // Keep each call under the relay's base64 limit; Ogg pages are far smaller than that.
        let maxRaw = limits.maxBase64Bytes / 4 * 3
        var chunks: [[UInt8]] = []
        if pendingBytes.count <= maxRaw {
            chunks = [pendingBytes]
        } else if case .ogg = encoder {
            chunks = OggPages.group(pendingBytes, maxBytes: maxRaw)
        } else {
            var i = 0
            while i < pendingBytes.count { chunks.append(Array(pendingBytes[i..<min(i + maxRaw, pendingBytes.count)])); i += maxRaw }
        }
        for c in chunks {
            queue.append(TalkAppendAudioParams(sessionId: info.sessionId, audioBase64: Data(c).base64EncodedString(), timestamp: start))
        }
        pendingBytes.removeAll(keepingCapacity: true)
        pendingStartMs = nil
        pendingAudioMs = 0
        pump()
    }

    /// One sender per stream: calls go on the wire strictly in queue order, up to
    /// `maxInFlight` of them awaiting their responses at once.
    private func pump() {
        guard running, !sending else { return }
        guard !queue.isEmpty, failure == nil else {
            if inFlight == 0 && queue.isEmpty { wakeIdle() }
            return
        }
        work.signal()
    }

    private var sending = false

    private func drain() async {
        sending = true
        var window: [PendingResponse] = []
        while failure == nil {
            if !queue.isEmpty && window.count < limits.maxInFlight {
                let call = queue.removeFirst()
                inFlight += 1
                maxInFlightSeen = max(maxInFlightSeen, inFlight)
                sentCalls.append((call.timestamp, call.audioBase64.count))
                lastSendAt = ContinuousClock.now
                do {
                    window.append(try await channel.send(GatewayMethod.talkSessionAppendAudio, params: try JSONValue(encoding: call),
                                                         timeoutMs: 10_000))
                } catch {
                    inFlight -= 1
                    fail("appendAudio failed: \(error)")
                }
            } else if !window.isEmpty {
                let r = window.removeFirst()
                do { _ = try await r.value() } catch { fail("appendAudio failed: \(error)") }
                inFlight -= 1
            } else {
                break
            }
        }
        inFlight -= window.count
        sending = false
        if inFlight == 0 && (queue.isEmpty || failure != nil) { wakeIdle() }
    }

    private func wakeIdle() {
        let w = idleWaiters
        idleWaiters.removeAll()
        for c in w { c.resume() }
    }

    private func wakeTranscript() {
        let w = transcriptWaiters
        transcriptWaiters.removeAll()
        for c in w { c.resume() }
    }

    /// A `talk.event` for this session.
    public func handle(_ event: TalkTranscriptEvent) {
        guard let info, event.sessionId == nil || event.sessionId == info.sessionId else { return }
        if event.isFinal {
            let text = event.text.trimmingCharacters(in: .whitespacesAndNewlines)
            finalTranscript = text.isEmpty ? nil : text
            transcriptArrived = true
            wakeTranscript()
        }
    }

    /// Ends the stream: last pages out, close, then the final transcript (≤ 5 s).
    public func finish() async -> Outcome {
        closed = true
        defer { ended = true; work.signal() }
        if !createStarted {
            await create()
        } else if !createDone {
            await withCheckedContinuation { createWaiters.append($0) }
        }
        if let failure { return .unavailable(failure) }
        guard let info else { return .unavailable("no relay session") }
        if case .ogg(let w)? = encoder {
            if let tail = try? w.finish() { pendingBytes += tail }
        } else if case .muLaw(let r)? = encoder {
            pendingBytes += G711.muLaw(encode: r.flush())
        } else if case .pcm(let r?)? = encoder {
            pendingBytes += PCMBuffer(format: .voice, samples: r.flush()).bytes
        }
        flush(force: true)
        if !running {
            if !queue.isEmpty { await drain() }
        } else if inFlight > 0 || !queue.isEmpty {
            await withCheckedContinuation { idleWaiters.append($0) }
        }
        if let failure { return .unavailable(failure) }
        do {
            _ = try await channel.request(GatewayMethod.talkSessionClose, params: ["sessionId": .string(info.sessionId)], timeoutMs: 10_000)
        } catch {
            log.log(.warning, "uplink", "talk.session.close failed: \(error)")
        }
        if !transcriptArrived {
            let wait = limits.transcriptWaitMs
            await withTaskGroup(of: Void.self) { group in
                group.addTask { await self.waitTranscript() }
                group.addTask { try? await Task.sleep(for: .milliseconds(wait)) }
                await group.next()
                group.cancelAll()
                self.wakeTranscript()
            }
        }
        if let failure { return .unavailable(failure) }
        return .transcript(finalTranscript)
    }

    private func waitTranscript() async {
        if transcriptArrived { return }
        await withCheckedContinuation { transcriptWaiters.append($0) }
    }

    /// Drops the stream (cancel or session switch) and closes the relay session if there is one.
    public func cancel() async {
        defer { ended = true; work.signal() }
        closed = true
        queue.removeAll()
        failure = failure ?? "cancelled"
        wakeTranscript()
        wakeIdle()
        if let info {
            _ = try? await channel.request(GatewayMethod.talkSessionClose, params: ["sessionId": .string(info.sessionId)], timeoutMs: 2_000)
        }
    }
}

/// Ogg page boundaries, so calls split only between pages.
public enum OggPages {
    /// Lengths of the whole pages at the start of `bytes` (a partial tail is not counted).
    public static func pageLengths(_ bytes: [UInt8]) -> [Int] {
        var out: [Int] = []
        var i = 0
        while i + 27 <= bytes.count, bytes[i] == 0x4f, bytes[i + 1] == 0x67, bytes[i + 2] == 0x67, bytes[i + 3] == 0x53 {
            let segments = Int(bytes[i + 26])
            guard i + 27 + segments <= bytes.count else { break }
            var body = 0
            for s in 0..<segments { body += Int(bytes[i + 27 + s]) }
            let total = 27 + segments + body
            guard i + total <= bytes.count else { break }
            out.append(total)
            i += total
        }
        return out
    }

    /// Groups whole pages into chunks of at most `maxBytes` (a single larger page stays whole).
    public static func group(_ bytes: [UInt8], maxBytes: Int) -> [[UInt8]] {
        var chunks: [[UInt8]] = []
        var current: [UInt8] = []
        var offset = 0
        for len in pageLengths(bytes) {
            if !current.isEmpty && current.count + len > maxBytes { chunks.append(current); current = [] }
            current += bytes[offset..<offset + len]
            offset += len
        }
        if offset < bytes.count { current += bytes[offset...] }
        if !current.isEmpty { chunks.append(current) }
        return chunks
    }
}
