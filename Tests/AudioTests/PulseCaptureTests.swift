// Tests for PulseCapture against the private server: exact 20 ms frames with the tone that was
// played into the "microphone", frames dropped (and counted) when nobody reads them, and the
// read size (fragment) changed while it runs.

import Audio
import ClawvoiceCore
import Foundation
import Testing

extension PulseAudioTests {
    @Suite struct Capture {
        @Test func `capture delivers exact 20 ms frames carrying a 1 kHz tone`() async throws {
            let server = try PulseTestServer.ensure()
            let mic = try PulseTestServer.scratchSink("mic", rate: 16_000, channels: 1, server: server)
            defer { mic.unload() }
            let connection = PulseConnection(server: server)
            defer { connection.close() }
            let (capture, recorder) = try await PulseFrameRecorder.start(mic, on: connection)
            #expect(capture.status == .running)

            let format = AudioFormat.voice
            let clip = PulseTestAudio.concatenate([
                PulseTestAudio.tone(hz: 1000, milliseconds: 1000, format: format),
                PulseTestAudio.silence(milliseconds: 300, format: format),
            ])
            try PulseTestServer.pacat(clip, sink: mic.name, server: server)
            try await Task.sleep(for: .milliseconds(200))
            capture.stop()
            await recorder.finished()

            let frames = recorder.frames
            #expect(frames.count > 60)
            #expect(frames.allSatisfy { $0.pcm.samples.count == 320 && $0.pcm.format == .voice })
            #expect(frames.map(\.sequence) == Array(0..<frames.count))
            #expect(capture.droppedFrames == 0)

            let toneFrames = frames.filter { $0.pcm.rms > 0.1 }
            // 1 s of tone is 50 frames; its edges may straddle two frames each.
            #expect((48...52).contains(toneFrames.count), "tone frames: \(toneFrames.count)")
            let tone = PCMBuffer(format: .voice, samples: toneFrames.flatMap(\.pcm.samples))
            #expect(abs(tone.rms - 0.5 / 2.0.squareRoot()) < 0.03)
            let hz = PulseTestAudio.frequency(of: tone)
            #expect(abs(hz - 1000) < 15, "measured \(hz) Hz")
        }

        @Test func `80 ms reads bring four frames at a time, 20 ms reads one, and none is lost`() async throws {
            let server = try PulseTestServer.ensure()
            // A microphone nobody else records (a source runs at the shortest latency asked of it),
            // with rewinds, like a sound card: a norewinds null sink renders in blocks of about a
            // third of the latency asked (parec at 80 ms gets ~40 reads a second there, ~11 here).
            let name = "cvt_pace_\(UUID().uuidString.prefix(8).lowercased())"
            let loaded = try PulseTestServer.pactl(["load-module", "module-null-sink", "sink_name=\(name)", "rate=16000", "channels=1"], server: server)
            let mic = PulseTestServer.ScratchSink(name: name, module: loaded.out.trimmingCharacters(in: .whitespacesAndNewlines), server: server)
            #expect(loaded.status == 0, "\(loaded.err)")
            defer { mic.unload() }
            let connection = PulseConnection(server: server)
            defer { connection.close() }
            let (capture, recorder) = try await PulseFrameRecorder.start(mic, on: connection)
            try await Task.sleep(for: .seconds(1))
            let relaxedFrom = recorder.count
            capture.setFragment(milliseconds: 80)
            try await Task.sleep(for: .milliseconds(1500))
            let promptFrom = recorder.count
            capture.setFragment(milliseconds: 20)
            try await Task.sleep(for: .seconds(1))
            capture.stop()
            await recorder.finished()

            let frames = recorder.frames
            #expect(frames.map(\.sequence) == Array(0..<frames.count))
            #expect(capture.droppedFrames == 0)
            #expect(frames.count > 150, "3.5 s of frames: \(frames.count)")
            // Frames read together share the moment they were read. Skip each span's first 200 ms
            // (the server takes a moment to change).
            func framesPerRead(_ range: Range<Int>) -> Double {
                let span = frames[(range.lowerBound + 10)..<max(range.lowerBound + 11, range.upperBound)]
                return Double(span.count) / Double(Set(span.map(\.receivedAt)).count)
            }
            let before = framesPerRead(10..<relaxedFrom), relaxed = framesPerRead(relaxedFrom..<promptFrom)
            let after = framesPerRead(promptFrom..<frames.count)
            #expect(before < 2, "20 ms reads: \(before) frames a read")
            #expect(relaxed >= 3, "80 ms reads: \(relaxed) frames a read")
            #expect(after < 2, "20 ms reads again: \(after) frames a read")
        }

        @Test func `espeak speech played into the microphone is one utterance to the endpointer`() async throws {
            let server = try PulseTestServer.ensure()
            let mic = try PulseTestServer.scratchSink("mic", rate: 16_000, channels: 1, server: server)
            defer { mic.unload() }
            let connection = PulseConnection(server: server)
            defer { connection.close() }
            let capture = PulseCapture(connection: connection, source: mic.monitor, bufferedFrames: 500)
            try await capture.start()
            try mic.resetClock()

            let speech = try CaptureEndpointerSpeechTests.espeak("Computer, what is the weather like today?")
            let speaker = PulsePlayback(connection: connection, sink: mic.name)
            let endpointing = Task {
                var endpointer = Endpointer()
                var events: [EndpointEvent] = []
                for await frame in capture.frames {
                    if let event = endpointer.feed(frame.pcm) { events.append(event) }
                    if endpointer.isFinished { break }
                }
                return events
            }
            // Calibration hears the quiet room first, as it would after a button press.
            try await Task.sleep(for: .milliseconds(600))
            #expect(try await speaker.play(PulseTestAudio.concatenate(speech)) == .finished)
            // The utterance ends 900 ms after the last word; stopping the capture is the deadline.
            let deadline = Task {
                try await Task.sleep(for: .seconds(3))
                capture.stop()
            }
            #expect(await endpointing.value == [.speechStarted, .endOfUtterance(reason: .silence)])
            deadline.cancel()
            capture.stop()
        }

        @Test func `a consumer that falls behind loses the oldest frames, counted`() async throws {
            let server = try PulseTestServer.ensure()
            let connection = PulseConnection(server: server)
            defer { connection.close() }
            let capture = PulseCapture(connection: connection, source: "cv_mic.monitor", bufferedFrames: 5)
            try await capture.start()
            // Nobody reads for 300 ms: about 15 frames arrive for 5 places.
            #expect(await PulseTestServer.waitUntil(timeout: .seconds(2)) { capture.droppedFrames >= 5 })
            capture.stop()
            var kept: [CapturedFrame] = []
            for await frame in capture.frames { kept.append(frame) }
            #expect(kept.count == 5)
            // What is left is the newest, in order.
            #expect(kept.map(\.sequence) == Array(kept[0].sequence..<kept[0].sequence + 5))
            #expect(kept[0].sequence >= 5)
        }
    }
}
