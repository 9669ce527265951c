// Tests for PulsePlayback against the private server, measured at the speaker's monitor: every
// clip rate plays for its true length, play returns after the drain, the streaming API joins
// pieces seamlessly, and stop() silences the monitor within 50 ms.

import Audio
import ClawvoiceCore
import Foundation
import Testing

extension PulseAudioTests {
    @Suite struct Playback {
        /// A capture of `sink.monitor` with a recorder on it, started and settled.
        private func monitor(_ sink: PulseTestServer.ScratchSink, on connection: PulseConnection)
            async throws -> (PulseCapture, PulseFrameRecorder)
        {
            let (capture, recorder) = try await PulseFrameRecorder.start(sink, on: connection, bufferedFrames: 1000)
            try await Task.sleep(for: .milliseconds(100))
            return (capture, recorder)
        }

        static let clipFormats = [
            AudioFormat(sampleRateHz: 22_050, channels: 1), AudioFormat(sampleRateHz: 22_050, channels: 2),
            AudioFormat(sampleRateHz: 44_100, channels: 2), AudioFormat(sampleRateHz: 16_000, channels: 1),
            AudioFormat(sampleRateHz: 24_000, channels: 1), AudioFormat(sampleRateHz: 48_000, channels: 2),
        ]

        @Test(arguments: clipFormats)
        func `a one-second clip plays for one second and play returns after the drain`(format: AudioFormat) async throws {
            let server = try PulseTestServer.ensure()
            let speaker = try PulseTestServer.scratchSink("spk", rate: 48_000, channels: 2, server: server)
            defer { speaker.unload() }
            let connection = PulseConnection(server: server)
            defer { connection.close() }
            let (capture, recorder) = try await monitor(speaker, on: connection)
            let playback = PulsePlayback(connection: connection, sink: speaker.name)

            let clip = PulseTestAudio.tone(hz: 440, milliseconds: 1000, format: format)
            let calledAt = ContinuousClock.now
            let outcome = try await playback.play(clip)
            let returnedAt = ContinuousClock.now
            #expect(outcome == .finished)
            #expect(!playback.isPlaying)
            try await Task.sleep(for: .milliseconds(200))
            capture.stop()
            await recorder.finished()

            let frames = recorder.frames
            let samples = frames.flatMap(\.pcm.samples)
            let span = try #require(PulseTestAudio.loudSpan(samples))
            let spanMs = Double(span.count) / 16
            print("playback \(format): monitor span \(spanMs) ms, play took \(returnedAt - calledAt)")
            #expect(abs(spanMs - 1000) <= 30, "span \(spanMs) ms at \(format)")

            // The last tone sample reached the monitor before play returned, give or take one
            // 20 ms capture fragment; returning at the last write would be a full buffer early.
            let lastLoudFrame = frames[span.upperBound / 320]
            let lag = lastLoudFrame.receivedAt - returnedAt
            print("playback \(format): last tone frame arrived \(lag) after play returned")
            #expect(lag < .milliseconds(45))
            #expect(returnedAt - calledAt >= .milliseconds(950))
            let firstWrite = try #require(playback.firstWriteAt)
            #expect(firstWrite >= calledAt && firstWrite - calledAt < .milliseconds(500))
        }

        @Test func `pieces written to an open stream play as one continuous clip`() async throws {
            let server = try PulseTestServer.ensure()
            let speaker = try PulseTestServer.scratchSink("stream", rate: 48_000, channels: 2, server: server)
            defer { speaker.unload() }
            let connection = PulseConnection(server: server)
            defer { connection.close() }
            let (capture, recorder) = try await monitor(speaker, on: connection)
            let playback = PulsePlayback(connection: connection, sink: speaker.name)

            let format = AudioFormat(sampleRateHz: 24_000, channels: 1)
            let whole = PulseTestAudio.tone(hz: 440, milliseconds: 600, format: format)
            try await playback.open(format: format)
            // Three pieces, as sentences of a TTS reply would come: 200 ms each, written promptly.
            for piece in 0..<3 {
                let part = Array(whole.samples[(piece * 4800)..<((piece + 1) * 4800)])
                try playback.write(PCMBuffer(format: format, samples: part))
                try await Task.sleep(for: .milliseconds(50))
            }
            #expect(throws: PulseError.self) { try playback.write(PulseTestAudio.tone(hz: 1, milliseconds: 10, format: .voice)) }
            #expect(try await playback.finish() == .finished)
            try await Task.sleep(for: .milliseconds(150))
            capture.stop()
            await recorder.finished()

            let samples = recorder.frames.flatMap(\.pcm.samples)
            let span = try #require(PulseTestAudio.loudSpan(samples))
            #expect(abs(Double(span.count) / 16 - 600) <= 30)
            // No hole inside: every 10 ms window of the span is loud.
            let quietWindows = stride(from: span.lowerBound, to: span.upperBound - 160, by: 160).filter {
                PCMBuffer(format: .voice, samples: Array(samples[$0..<$0 + 160])).rms < 0.1
            }
            #expect(quietWindows.isEmpty, "quiet windows inside the clip at \(quietWindows.map { $0 / 16 }) ms")
        }

        @Test func `stop silences the monitor within 50 ms`() async throws {
            let server = try PulseTestServer.ensure()
            let speaker = try PulseTestServer.scratchSink("stop", rate: 48_000, channels: 2, server: server)
            defer { speaker.unload() }
            let connection = PulseConnection(server: server)
            defer { connection.close() }
            let (capture, recorder) = try await monitor(speaker, on: connection)
            let playback = PulsePlayback(connection: connection, sink: speaker.name)

            let clip = PulseTestAudio.tone(hz: 440, milliseconds: 5000, format: AudioFormat(sampleRateHz: 44_100, channels: 2))
            let player = Task { try await playback.play(clip) }
            #expect(await PulseTestServer.waitUntil(timeout: .seconds(3)) { playback.firstWriteAt != nil })
            try await Task.sleep(for: .milliseconds(1000))
            let stopAt = ContinuousClock.now
            playback.stop()
            let stopReturnedAt = ContinuousClock.now
            #expect(try await player.value == .stopped)
            try await Task.sleep(for: .milliseconds(300))
            capture.stop()
            await recorder.finished()

            // Give every sample the time it reached us: frames handed over in one batch share a
            // receive time, and a sample sits (samples after it in the batch) / 16 kHz earlier.
            // That over-estimates when the monitor produced it, so the check errs strict.
            let frames = recorder.frames
            var times: [ContinuousClock.Instant] = []
            var samples: [Int16] = []
            var i = 0
            while i < frames.count {
                var j = i
                while j + 1 < frames.count && frames[j + 1].receivedAt == frames[i].receivedAt { j += 1 }
                let batch = frames[i...j].flatMap(\.pcm.samples)
                for k in 0..<batch.count {
                    times.append(frames[i].receivedAt - .microseconds((batch.count - k) * 1_000_000 / 16_000))
                }
                samples += batch
                i = j + 1
            }
            let span = try #require(PulseTestAudio.loudSpan(samples))
            #expect(Double(span.count) / 16 > 900, "the tone played for about a second before stop")

            let loudLimit = Int(0.005 * 32768)
            let lastLoud = try #require(samples.lastIndex { abs(Int($0)) > loudLimit })
            let stopToSilence = times[lastLoud] - stopAt
            // Negative means the last tone reached the monitor before the call: a null sink renders
            // up to one block (10–20 ms here) ahead of the clock, so a listener would hear about
            // that much more.
            print("stop: last tone sample reached the monitor \(stopToSilence) after the stop call (stop() itself took \(stopReturnedAt - stopAt))")

            let windowsAfter = stride(from: 0, to: samples.count - 160, by: 160).filter { times[$0] >= stopAt + .milliseconds(50) }
            #expect(!windowsAfter.isEmpty)
            let loudAfter = windowsAfter.filter { PCMBuffer(format: .voice, samples: Array(samples[$0..<$0 + 160])).rms >= 0.005 }
            #expect(loudAfter.isEmpty, "loud 10 ms windows at \(loudAfter.map { times[$0] - stopAt }) after stop")
        }

        @Test func `stop with nothing playing and finish without open are harmless`() async throws {
            let server = try PulseTestServer.ensure()
            let connection = PulseConnection(server: server)
            defer { connection.close() }
            let playback = PulsePlayback(connection: connection, sink: "cv_speaker")
            playback.stop()
            await #expect(throws: PulseError.closed) { _ = try await playback.finish() }
            #expect(throws: PulseError.closed) { try playback.write(PulseTestAudio.silence(milliseconds: 20, format: .voice)) }
            #expect(try await playback.play(PulseTestAudio.tone(hz: 440, milliseconds: 50, format: .voice)) == .finished)
        }
    }
}
