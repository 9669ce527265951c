// Tests for PulseConnection: device lists from the private server, clean errors for names that do
// not exist, a missing server that is retried without crashing, and the pure backoff and headset rules.

import Audio
import ClawvoiceCore
import Foundation
import Testing

extension PulseAudioTests {
    @Suite struct Connection {
        @Test func `sinks and sources list the test devices with monitors marked`() async throws {
            let server = try PulseTestServer.ensure()
            let connection = PulseConnection(server: server)
            defer { connection.close() }

            let sinks = try await connection.sinks()
            let speaker = try #require(sinks.first { $0.name == "cv_speaker" })
            let mic = try #require(sinks.first { $0.name == "cv_mic" })
            #expect(speaker.sampleSpec == "s16le 2ch 48000Hz")
            #expect(mic.sampleSpec == "s16le 1ch 16000Hz")
            #expect(speaker.isDefault)
            #expect(!speaker.isMonitor && !mic.isMonitor)
            #expect(!speaker.isHeadset)

            let sources = try await connection.sources()
            let micMonitor = try #require(sources.first { $0.name == "cv_mic.monitor" })
            #expect(micMonitor.isMonitor)
            #expect(micMonitor.isDefault)
            #expect(sources.contains { $0.name == "cv_speaker.monitor" && $0.isMonitor })
            #expect(sources.allSatisfy { $0.isMonitor }, "the test server has no real microphones")
        }

        @Test func `a missing source name is one clear line`() async throws {
            let server = try PulseTestServer.ensure()
            let connection = PulseConnection(server: server)
            defer { connection.close() }
            let capture = PulseCapture(connection: connection, source: "no_such_source")
            await #expect(throws: PulseError.noSuchSource("no_such_source")) { try await capture.start() }
            #expect(PulseError.noSuchSource("no_such_source").description ==
                "no PulseAudio source named no_such_source; `clawvoice audio devices` lists them")
            #expect(capture.status == .failed(PulseError.noSuchSource("no_such_source").description))
            capture.stop()
        }

        @Test func `a missing sink name is one clear line`() async throws {
            let server = try PulseTestServer.ensure()
            let connection = PulseConnection(server: server)
            defer { connection.close() }
            let playback = PulsePlayback(connection: connection, sink: "no_such_sink")
            let tone = PulseTestAudio.tone(hz: 440, milliseconds: 100, format: AudioFormat(sampleRateHz: 16_000, channels: 1))
            await #expect(throws: PulseError.noSuchSink("no_such_sink")) { _ = try await playback.play(tone) }
            #expect(!playback.isPlaying)
        }

        @Test func `no server at all is reported and retried without crashing`() async throws {
            let missing = "unix:/tmp/cvt-nowhere-\(UUID().uuidString.prefix(8))/native"
            let states = StateLog()
            let connection = PulseConnection(server: missing, backoff: PulseBackoff(initialSeconds: 0.05, maximumSeconds: 0.1))
            connection.onStateChange = { states.append($0) }
            defer { connection.close() }

            // Several failed attempts in a row: it keeps trying.
            #expect(await PulseTestServer.waitUntil(timeout: .seconds(3)) { states.failures >= 3 })
            guard case .failed(let reason) = connection.state else {
                Issue.record("state is \(connection.state), not failed")
                return
            }
            #expect(reason.hasPrefix("pa_context_connect: "))
            #expect(!reason.contains("\n"))

            await #expect(throws: PulseError.self) { try await connection.waitUntilReady(timeout: .milliseconds(200)) }
            await #expect(throws: PulseError.self) { _ = try await connection.sources(timeout: .milliseconds(200)) }
            let capture = PulseCapture(connection: connection)
            await #expect(throws: PulseError.self) { try await capture.start(timeout: .milliseconds(200)) }
            capture.stop()
        }

        @Test func `close stops reconnecting and says disconnected`() async throws {
            let server = try PulseTestServer.ensure()
            let connection = PulseConnection(server: server)
            try await connection.waitUntilReady()
            #expect(connection.generation == 1)
            connection.close()
            #expect(connection.state == .disconnected)
            await #expect(throws: PulseError.closed) { try await connection.waitUntilReady(timeout: .milliseconds(100)) }
        }
    }
}

/// State changes seen through `onStateChange`.
final class StateLog: @unchecked Sendable {
    private let lock = NSLock()
    private var log: [PulseConnectionState] = []

    func append(_ state: PulseConnectionState) {
        lock.lock()
        log.append(state)
        lock.unlock()
    }

    var states: [PulseConnectionState] {
        lock.lock()
        defer { lock.unlock() }
        return log
    }

    var failures: Int { states.filter { if case .failed = $0 { return true } else { return false } }.count }
}

@Suite struct PulseBackoffTests {
    @Test func `delays double from half a second and stop at ten`() {
        var backoff = PulseBackoff()
        let delays = (0..<8).map { _ in backoff.nextDelaySeconds() }
        #expect(delays == [0.5, 1, 2, 4, 8, 10, 10, 10])
        backoff.reset()
        #expect(backoff.nextDelaySeconds() == 0.5)
    }

    @Test func `a very long outage does not overflow`() {
        var backoff = PulseBackoff()
        for _ in 0..<10_000 { _ = backoff.nextDelaySeconds() }
        #expect(backoff.nextDelaySeconds() == 10)
    }
}

@Suite struct AudioDeviceTests {
    private func device(port: String? = nil, portDescription: String? = nil, formFactor: String? = nil) -> AudioDevice {
        AudioDevice(name: "x", description: "x", sampleSpec: "s16le 1ch 16000Hz",
                    activePortName: port, activePortDescription: portDescription, formFactor: formFactor)
    }

    @Test func `headset ports and form factors count as headsets`() {
        #expect(device(port: "analog-input-headset-mic").isHeadset)
        #expect(device(port: "analog-output-headphones").isHeadset)
        #expect(device(portDescription: "Headset Microphone").isHeadset)
        #expect(device(formFactor: "headset").isHeadset)
        #expect(device(formFactor: "headphone").isHeadset)
        #expect(device(formFactor: "hands-free").isHeadset)
        #expect(device(port: "headset-head-unit").isHeadset)
    }

    @Test func `speakers, line-ins and webcams do not`() {
        #expect(!device().isHeadset)
        #expect(!device(port: "analog-output-speaker").isHeadset)
        #expect(!device(port: "analog-input-mic", portDescription: "Microphone", formFactor: "webcam").isHeadset)
        #expect(!device(formFactor: "internal").isHeadset)
    }
}
