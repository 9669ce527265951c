// The live sound of the node: one PulseAudio connection, the microphone capture running for
// as long as the daemon runs (so pre-roll and `ptt.start → first frame` cost nothing), its
// frames delivered in order to the TalkController, and the playback sink for speech.

public import ClawvoiceCore
import GatewayProtocol
public import Audio
import Foundation
public import GatewayClient

/// Speech goes to PulseAudio.
public struct PulseSpeechSink: SpeechSink {
    public let playback: PulsePlayback
    /// Where what is played is kept for the echo canceller (nil: no echo cancellation).
    public let reference: EchoReference?
    public init(playback: PulsePlayback, reference: EchoReference? = nil) {
        self.playback = playback
        self.reference = reference
    }
    public func play(_ pcm: PCMBuffer) async throws -> Bool {
        guard let reference else { return try await playback.play(pcm) == .finished }
        reference.begin(pcm)
        defer { reference.end() }
        // PulseAudio's timing info (interpolated) tells when the clip is heard; the reference follows it.
        let playback = self.playback
        // A child for the clip's length: leaving this scope cancels and awaits it (before end()).
        async let aligning: Void = {
            while !Task.isCancelled {
                try? await Task.sleep(for: .milliseconds(100))
                if let t = playback.timing(), t.positionMicroseconds > 0 { reference.align(startedAt: t.startedAt) }
            }
        }()
        return try await playback.play(pcm) == .finished
    }
    public func stop() async { playback.stop() }
}

/// Speech goes to a WAV file (`say --out`): what would have been played, nothing played.
public struct WAVFileSink: SpeechSink {
    public let path: String
    public init(path: String) { self.path = path }
    public func play(_ pcm: PCMBuffer) async throws -> Bool {
        guard FileManager.default.createFile(atPath: path, contents: Data(WAVFile.encode(pcm))) else {
            throw SpeechSinkError(message: "cannot write \(path)")
        }
        return true
    }
    public func stop() async {}
}

public struct SpeechSinkError: Error, CustomStringConvertible { public var message: String; public var description: String { message } }

public final class LiveAudio: Sendable {
    public let connection: PulseConnection
    public let playback: PulsePlayback
    private let source: String?
    private let log: LogSink
    private let state = Locked<(capture: PulseCapture?, stopped: Bool, status: String)>((nil, false, "starting"))

    /// `server`: a PulseAudio server string; nil means PULSE_SERVER or the default, as libpulse decides.
    public init(source: String?, sink: String?, server: String? = nil, log: LogSink) {
        connection = PulseConnection(server: server, clientName: "clawvoice")
        playback = PulsePlayback(connection: connection, sink: sink)
        self.source = source
        self.log = log
    }

    /// "running", "waiting for the sound server", … for `status`.
    public var captureStatus: String { state.withLock { $0.status } }

    /// Starts the capture loop as a child of the talk loop (tools and tests; the daemon runs
    /// `run` as a service of its own). It ends with the talk loop or with `stop()`.
    public func start(feeding controller: TalkController) {
        controller.send(.setting(.microphone(self)))
    }

    /// The capture loop until cancelled: frames go to `controller` in order; the microphone
    /// state follows the stream; a failed or lost stream is opened again every 2 s.
    public func run(feeding controller: TalkController) async {
        var announcedFailure = false
        while !Task.isCancelled && !state.withLock({ $0.stopped }) {
            let capture = PulseCapture(connection: connection, source: source)
            capture.onStatusChange = { [state, log] status in
                state.withLock { $0.status = status.description }
                switch status {
                case .running: controller.setMicrophone(.live)
                case .waitingForServer: controller.setMicrophone(.unavailable("the sound server is not running"))
                case .failed(let why): controller.setMicrophone(.unavailable(why))
                default: break
                }
                if case .waitingForServer = status { log.log(.warning, "audio", "sound server gone; capture resumes when it is back") }
            }
            // Straight from the sound server's thread into the talk loop's inbox (no hop between).
            capture.onFrame = { frame in controller.micFrame(frame.pcm, at: frame.recordedAt, followsGap: frame.followsGap) }
            // The loop's pace sets the server's read size: 80 ms while only the wake word listens.
            controller.onMicrophonePacing { pacing in capture.setFragment(milliseconds: pacing.fragmentMilliseconds) }
            // stop() between the check above and here finds the capture and stops it.
            guard state.withLock({ s in s.capture = capture; return !s.stopped }) else { break }
            do {
                try await capture.start()
                announcedFailure = false
                controller.setMicrophone(.live)
                log.log(.info, "audio", "capturing from \(source ?? "the default source")")
                // The frame stream does not end by itself on cancellation: stop the capture then.
                await withTaskCancellationHandler {
                    for await _ in capture.frames {}   // ends when the capture does
                } onCancel: {
                    capture.stop()
                }
                if Task.isCancelled || state.withLock({ $0.stopped }) { break }
            } catch {
                state.withLock { $0.status = "unavailable: \(error)" }
                controller.setMicrophone(.unavailable("\(error)"))
                if !announcedFailure {
                    log.log(.warning, "audio", "microphone unavailable: \(error); retrying every 2 s")
                    announcedFailure = true
                }
                capture.stop()
            }
            controller.onMicrophonePacing(nil)
            try? await Task.sleep(for: .seconds(2))
        }
        controller.onMicrophonePacing(nil)
        let capture = state.withLock { s -> PulseCapture? in defer { s.capture = nil }; return s.capture }
        capture?.stop()
        playback.stop()
    }

    /// Ends the capture loop (`run` returns within its retry pause) and the playback.
    public func stop() {
        let capture = state.withLock { s in
            defer { s.capture = nil; s.stopped = true }
            return s.capture
        }
        capture?.stop()
        playback.stop()
    }
}
