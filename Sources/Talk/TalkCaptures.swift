// The talk loop's capture executor: it owns the relay uplinks of the captures in flight, their
// PCM and voice notes, and the turn's way out (the outbox write, or chat.send without an outbox).
// It carries out the machine's capture actions (open, append, finish, cancel, deliver, withdraw);
// slow parts run as the loop's child jobs and post their results back into the inbox.

import Audio
import ClawvoiceCore
import Foundation
import GatewayClient
import GatewayProtocol

final class CaptureExecutor {
    private struct CaptureIO {
        var uplink: RelayUplink
        var pcm: [Int16] = []
        var startedAt = ContinuousClock.now
        var firstFrameAt: ContinuousClock.Instant?
        var stoppedAt: ContinuousClock.Instant?
    }

    private let channel: any OperatorChannel
    private let log: LogSink
    private let post: AsyncStream<TalkController.Item>.Continuation
    private let jobs: TalkJobs
    /// The durable outbox turns go through (nil: straight to chat.send).
    var outbox: OutboxSender?
    private var captures: [String: CaptureIO] = [:]
    /// Voice notes of finished captures, until their turn is delivered (bytes, milliseconds).
    private var notes: [String: ([UInt8], Double)] = [:]
    /// The turn being delivered and the outbox it went to (a withdrawal asks the same one).
    private var delivery: (id: String, outbox: OutboxSender?)?

    init(channel: any OperatorChannel, log: LogSink, outbox: OutboxSender?, post: AsyncStream<TalkController.Item>.Continuation,
         jobs: TalkJobs) {
        self.channel = channel
        self.log = log
        self.outbox = outbox
        self.post = post
        self.jobs = jobs
    }

    var isEmpty: Bool { captures.isEmpty }

    /// Opens a relay stream and starts it with the leading audio (pre-roll or wake lookback).
    func open(_ id: String, sessionKey: String?, leading first: [PCMBuffer], config: TalkConfig) async {
        let uplink = RelayUplink(channel: channel, sessionKey: sessionKey, log: log, opusBitrate: config.opusBitrate,
                                 opusComplexity: config.opusComplexity)
        var io = CaptureIO(uplink: uplink)
        for f in first { io.pcm += f.samples }
        captures[id] = io
        // Inline on the loop: the leading audio is in the uplink before any later frame, in order;
        // the relay session opens in the uplink's run (a child of the loop), which holds the frames meanwhile.
        for f in first { await uplink.append(f) }
        jobs.add { await uplink.run() }
    }

    func append(_ id: String, _ frame: PCMBuffer) async {
        guard var io = captures[id] else { return }
        if io.firstFrameAt == nil { io.firstFrameAt = .now }
        io.pcm += frame.samples
        captures[id] = io
        // Relay calls leave in the order the uplink receives frames (one loop, one order).
        await io.uplink.append(frame)
    }

    /// Transcripts belong to the capture being captured or finished; the uplink filters by session id.
    func transcript(_ t: TalkTranscriptEvent) async {
        for io in captures.values { await io.uplink.handle(t) }
    }

    /// Closes the relay, waits for its transcript, encodes the voice note; posts `captureDone`.
    func finish(_ id: String, config: TalkConfig) {
        // The entry stays until captureDone: transcripts still reach the finishing uplink.
        guard var io = captures[id] else { return }
        io.stoppedAt = .now
        captures[id] = io
        let (uplink, pcm, bitrate, post) = (io.uplink, io.pcm, config.opusBitrate, self.post)
        let (startedAt, firstFrameAt, stoppedAt) = (io.startedAt, io.firstFrameAt, io.stoppedAt ?? .now)
        let (dir, keep, maxAge) = (config.voiceNoteDirectory, config.keepVoiceNotes, config.voiceNotesMaxAgeMs)
        jobs.add {
            let outcome = await uplink.finish()
            var timing = TalkController.CaptureTiming(startToFirstFrame: firstFrameAt.map { $0 - startedAt })
            if let last = await uplink.lastSendAt { timing.stopToLastUplinkCall = last - stoppedAt }
            let buffer = PCMBuffer(format: .voice, samples: pcm)
            let note = buffer.isEmpty ? nil : try? OggOpusVoiceNote.encode(buffer, bitrate: bitrate)
            if let note { VoiceNotes.save(note, id: id, directory: dir, keep: keep, maxAgeMs: maxAge) }
            post.yield(.captureDone(id: id, TalkMachine.Finished(outcome: outcome, audioMs: buffer.durationMilliseconds,
                                                                  hasVoiceNote: note != nil),
                                    note: note, timing: timing))
        }
    }

    /// The capture's result is in: its voice note waits for the turn's delivery.
    func done(_ id: String, note: [UInt8]?, audioMs: Double) {
        if captures.removeValue(forKey: id) != nil, let note { notes[id] = (note, audioMs) }
    }

    /// Drops the stream and closes its relay session. True when the capture was still listening.
    func cancel(_ id: String) -> Bool {
        notes.removeValue(forKey: id)
        guard let io = captures.removeValue(forKey: id) else { return false }
        let uplink = io.uplink
        jobs.add { await uplink.cancel() }
        return io.stoppedAt == nil
    }

    /// Takes the turn back out of the outbox the turn went to; posts `withdrawn`. Without an
    /// outbox it went straight to chat.send: it cannot be taken back.
    func withdraw(id: String, idempotencyKey key: String) {
        let (outbox, post) = (delivery?.id == id ? delivery?.outbox : nil, self.post)
        jobs.add {
            let removed = await outbox?.withdraw(idempotencyKey: key) ?? false
            post.yield(.input(.withdrawn(id: id, removed: removed)))
        }
    }

    /// Puts the turn in the durable outbox (or sends it, without one); posts `delivered`.
    /// `queued` only once the turn is committed; a failed write is `not_queued`.
    func deliver(id: String, message: String, voiceNote: Bool, sessionKey: String?, idempotencyKey idem: String) {
        var noteAttachment: JSONValue?
        if voiceNote, let (note, ms) = notes[id] {
            noteAttachment = ["type": "audio", "mimeType": "audio/ogg", "fileName": .string("\(id).opus"),
                              "content": .string(Data(note).base64EncodedString()),
                              "sizeBytes": .number(Double(note.count)), "durationMs": .number(ms.rounded())]
        }
        notes.removeValue(forKey: id)
        delivery = (id, outbox)
        let (outbox, channel, log, post, attachment) = (self.outbox, self.channel, self.log, self.post, noteAttachment)
        jobs.add {
            let key: String
            if let k = sessionKey { key = k } else { key = await channel.mainSessionKey() ?? "main" }
            if let outbox {
                do {
                    // nil: a cancel took the turn back before it was written.
                    let item = try await outbox.enqueueTurn(sessionKey: key, message: message,
                                                            attachmentsJSON: attachment.map { JSONValue.array([$0]).description },
                                                            thinking: "low", idempotencyKey: idem)
                    post.yield(.input(.delivered(id: id, item == nil ? .cancelled : .queued, idempotencyKey: idem)))
                } catch {
                    log.log(.error, "talk", "the turn could not be queued: \(error)")
                    post.yield(.input(.delivered(id: id, .notQueued, idempotencyKey: idem)))
                }
                return
            }
            post.yield(.input(.delivered(id: id, .queued, idempotencyKey: idem)))
            do {
                let params = ChatSendParams(sessionKey: key, message: message, idempotencyKey: idem, thinking: "low",
                                            attachments: attachment.map { [$0] })
                let ack = try await channel.request(GatewayMethod.chatSend, params: try JSONValue(encoding: params), timeoutMs: 30_000)
                if let runId = ack["runId"]?.stringValue { post.yield(.input(.turnSent(idempotencyKey: idem, runId: runId))) }
            } catch {
                log.log(.error, "talk", "chat.send failed: \(error)")
            }
        }
    }
}
