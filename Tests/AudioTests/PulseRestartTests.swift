// Tests that a sound server dying mid-capture is survived: kill -9 the server, start it again, and
// the same PulseConnection and PulseCapture carry on by themselves; playback works afterwards.
// Uses its own server directory, so the shared test server is never killed.

import Audio
import ClawvoiceCore
import Foundation
import Testing

extension PulseAudioTests {
    @Suite struct Restart {
        @Test func `killing and restarting the server mid-capture leaves capture and playback working`() async throws {
            let dir = "/tmp/cvt-restart-\(UUID().uuidString.prefix(8).lowercased())"
            defer {
                _ = try? PulseTestServer.runScript("stop", dir: dir)
                try? FileManager.default.removeItem(atPath: dir)
            }
            let started = try PulseTestServer.runScript("start", dir: dir)
            let server = try #require(PulseTestServer.exportedServer(in: started.out), "\(started.err)")
            let serverPid = try #require(Int32(try String(contentsOfFile: dir + "/pulseaudio.pid", encoding: .utf8)
                .trimmingCharacters(in: .whitespacesAndNewlines)))

            let states = StateLog()
            let connection = PulseConnection(server: server)
            connection.onStateChange = { states.append($0) }
            defer { connection.close() }
            let capture = PulseCapture(connection: connection, source: "cv_mic.monitor", bufferedFrames: 2000)
            let recorder = PulseFrameRecorder(capture)
            try await capture.start()
            #expect(await PulseTestServer.waitUntil(timeout: .seconds(3)) { recorder.count >= 10 })
            let generationBefore = connection.generation

            let killedAt = ContinuousClock.now
            kill(serverPid, SIGKILL)
            #expect(await PulseTestServer.waitUntil(timeout: .seconds(3)) { states.states.contains(.disconnected) })
            #expect(await PulseTestServer.waitUntil(timeout: .seconds(1)) { capture.status == .waitingForServer })
            let lostAfter = ContinuousClock.now - killedAt
            // Stay down long enough for at least one reconnect attempt to fail.
            try await Task.sleep(for: .milliseconds(1200))
            #expect(connection.state != .ready)
            #expect(states.failures >= 1)

            let restarted = try PulseTestServer.runScript("start", dir: dir)
            #expect(restarted.status == 0, "\(restarted.err)")
            let restartedAt = ContinuousClock.now
            #expect(await PulseTestServer.waitUntil(timeout: .seconds(10)) { connection.state == .ready })
            let readyAfter = ContinuousClock.now - restartedAt
            #expect(await PulseTestServer.waitUntil(timeout: .seconds(5)) { recorder.frames.contains { $0.followsGap } })
            let resumed = try #require(recorder.frames.first { $0.followsGap })
            print("restart: disconnect noticed \(lostAfter) after kill -9; ready \(readyAfter) and frames again \(resumed.receivedAt - restartedAt) after the server was back; capture gap \(capture.gaps)")
            #expect(resumed.receivedAt - restartedAt < .seconds(5))
            #expect(connection.generation == generationBefore + 1)
            #expect(capture.gaps.count == 1)
            #expect(capture.status == .running)
            let lastState = states.states.lastIndex(of: .ready) ?? -1
            #expect((states.states.firstIndex(of: .disconnected) ?? .max) < lastState)

            // Playback on the same connection works again, and the resumed capture hears it.
            let playback = PulsePlayback(connection: connection, sink: "cv_mic")
            let tone = PulseTestAudio.tone(hz: 1000, milliseconds: 300, format: .voice)
            #expect(try await playback.play(tone) == .finished)
            #expect(await PulseTestServer.waitUntil(timeout: .seconds(2)) {
                recorder.frames.drop { !$0.followsGap }.filter { $0.pcm.rms > 0.1 }.count >= 12
            })
            capture.stop()
            await recorder.finished()
            #expect(recorder.frames.allSatisfy { $0.pcm.samples.count == 320 })
        }
    }
}
