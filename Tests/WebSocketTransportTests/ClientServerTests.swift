import Foundation
import Testing
@testable import WebSocketTransport

struct ClientServerTests {
    @Test func `text and binary messages cross in both directions intact and no origin header is sent`() async throws {
        let pair = try await LoopbackPair.open(path: "/openclaw-gw?probe=1")
        defer { pair.server.shutdown(grace: .zero) }

        let headers = try #require(pair.serverEvents.events.lazy.compactMap(\.connectedHeaders).first)
        #expect(headers["origin"] == nil)
        #expect(headers["path"] == "/openclaw-gw?probe=1")
        #expect(headers["host"] == "127.0.0.1:\(pair.server.port)")
        #expect(headers["remote-address"] == "127.0.0.1")
        #expect(pair.server.connectionIDs == [pair.id])

        let text = WebSocketMessage.text(#"{"type":"req","id":"1","method":"connect","note":"héllo ✓"}"#)
        let binary = WebSocketMessage.binary([0, 1, 2, 255, 254] + Array("{}".utf8))
        pair.client.send(text)
        pair.client.send(binary)
        let received = await pair.serverEvents.wait(for: "both client messages at the server") { events in
            let messages = events.compactMap { $0.message(from: pair.id) }
            return messages.count >= 2 ? messages : nil
        }
        #expect(received == [text, binary])

        // Echo them back.
        for message in received ?? [] { pair.server.send(message, to: pair.id) }
        let echoed = await pair.clientEvents.wait(for: "both echoes at the client") { events in
            let messages = events.compactMap(\.message)
            return messages.count >= 2 ? messages : nil
        }
        #expect(echoed == [text, binary])
        #expect(pair.clientEvents.events.first?.isOpened == true)
        #expect(pair.clientEvents.events.filter(\.isOpened).count == 1)

        pair.client.close()
        await pair.clientEvents.waitForEnd()
    }

    @Test func `a 5 MiB binary message arrives intact both ways`() async throws {
        let pair = try await LoopbackPair.open()
        defer { pair.server.shutdown(grace: .zero) }
        let big = patternBytes(count: 5 << 20)

        pair.client.send(.binary(big))
        let atServer = await pair.serverEvents.wait(for: "5 MiB at the server", timeout: .seconds(20)) { events in
            events.lazy.compactMap { $0.message(from: pair.id) }.first
        }
        #expect(atServer == .binary(big))

        pair.server.send(.binary(big), to: pair.id)
        let atClient = await pair.clientEvents.wait(for: "5 MiB at the client", timeout: .seconds(20)) { events in
            events.lazy.compactMap(\.message).first
        }
        #expect(atClient == .binary(big))
        pair.client.close()
    }

    @Test func `a message over the client's limit ends the stream with messageTooLarge and closes with 1009`() async throws {
        var options = WebSocketClientOptions()
        options.maxMessageBytes = 64 << 10
        let pair = try await LoopbackPair.open(clientOptions: options)
        defer { pair.server.shutdown(grace: .zero) }

        pair.server.send(.binary(patternBytes(count: 100 << 10)), to: pair.id)
        let size = await pair.clientEvents.wait(for: "messageTooLarge") { events in
            events.lazy.compactMap { event -> Int? in
                if case .failed(.messageTooLarge(let bytes)) = event { return bytes }
                return nil
            }.first
        }
        #expect(size == 100 << 10)
        #expect(pair.clientEvents.events.compactMap(\.message).isEmpty)
        await pair.clientEvents.waitForEnd()
        let end = await pair.serverEvents.wait(for: "server sees the connection end") { events in
            events.lazy.compactMap { $0.disconnect(of: pair.id) }.first
        }
        #expect(end?.code == 1009)
        #expect(pair.client.waitUntilStopped(timeout: .seconds(10)))
    }

    @Test func `a message over the server's limit closes only that connection with 1009`() async throws {
        let pair = try await LoopbackPair.open(serverOptions: WebSocketServerOptions(maxMessageBytes: 1024))
        defer { pair.server.shutdown(grace: .zero) }
        pair.client.send(.text(String(repeating: "x", count: 1000)))
        pair.client.send(.text(String(repeating: "y", count: 2000)))
        let end = await pair.serverEvents.wait(for: "server drops the oversized connection") { events in
            events.lazy.compactMap { $0.disconnect(of: pair.id) }.first
        }
        #expect(end?.code == 1009)
        #expect(pair.serverEvents.events.compactMap { $0.message(from: pair.id) } == [.text(String(repeating: "x", count: 1000))])
        let terminal = await pair.clientEvents.wait(for: "client sees 1009") { events in
            events.last.flatMap { event -> Int?? in if case .closed(let code, _) = event { return code } else { return nil } }
        }
        #expect(terminal == 1009)
    }

    @Test func `a server close with 1012 reaches the client with its code and reason`() async throws {
        let pair = try await LoopbackPair.open()
        defer { pair.server.shutdown(grace: .zero) }
        pair.server.send(.text("last words"), to: pair.id)
        pair.server.close(pair.id, code: 1012, reason: "service restart")

        await pair.clientEvents.waitForEnd()
        let events = pair.clientEvents.events
        #expect(events.compactMap(\.message) == [.text("last words")])
        guard case .closed(let code, let reason)? = events.last else {
            Issue.record("expected .closed, got \(String(describing: events.last))")
            return
        }
        #expect(code == 1012)
        #expect(reason == "service restart")
        let end = await pair.serverEvents.wait(for: "server disconnect") { events in
            events.lazy.compactMap { $0.disconnect(of: pair.id) }.first
        }
        #expect(end?.code == 1012)
        #expect(pair.server.connectionIDs.isEmpty)
    }

    @Test func `a client close with 4000 reaches the server with its code and reason`() async throws {
        let pair = try await LoopbackPair.open()
        defer { pair.server.shutdown(grace: .zero) }
        pair.client.send(.text("before close"))
        pair.client.close(code: 4000, reason: "tick timeout")

        let end = await pair.serverEvents.wait(for: "server sees 4000") { events in
            events.lazy.compactMap { $0.disconnect(of: pair.id) }.first
        }
        #expect(end?.code == 4000)
        #expect(end?.reason == "tick timeout")
        #expect(pair.serverEvents.events.compactMap { $0.message(from: pair.id) } == [.text("before close")])
        await pair.clientEvents.waitForEnd()
        guard case .closed(let code, let reason)? = pair.clientEvents.events.last else {
            Issue.record("expected .closed last, got \(pair.clientEvents.events)")
            return
        }
        #expect(code == 4000)
        #expect(reason == "tick timeout")
        #expect(pair.client.waitUntilStopped(timeout: .seconds(5)))
    }

    @Test func `a dropped connection ends the client's stream promptly without a close code`() async throws {
        let pair = try await LoopbackPair.open()
        defer { pair.server.shutdown(grace: .zero) }
        let start = ContinuousClock.now
        pair.server.drop(pair.id)
        // "Promptly": well before the 10 s connect timeout, with room for round 1's stalls.
        #expect(await pair.clientEvents.waitForEnd(timeout: .seconds(6)))
        #expect(ContinuousClock.now - start < .seconds(6))
        let last = try #require(pair.clientEvents.events.last)
        #expect(last.isTerminal)
        if case .closed(let code, _) = last { #expect(code == nil) }
        let end = await pair.serverEvents.wait(for: "server disconnect after drop") { events in
            events.lazy.compactMap { $0.disconnect(of: pair.id) }.first
        }
        #expect(end?.code == nil)
    }

    @Test func `a new server can bind the same port right after shutdown`() async throws {
        let first = try await LoopbackPair.open()
        let port = first.server.port
        #expect(port > 0)
        first.server.shutdown()
        await first.clientEvents.waitForEnd()
        guard case .closed(let code, _)? = first.clientEvents.events.last else {
            Issue.record("expected .closed after shutdown, got \(first.clientEvents.events)")
            return
        }
        #expect(code == 1001)
        await first.serverEvents.waitForEnd()

        let second = try await LoopbackPair.open(serverOptions: WebSocketServerOptions(port: port))
        defer { second.server.shutdown(grace: .zero) }
        #expect(second.server.port == port)
        second.client.send(.text("again"))
        let message = await second.serverEvents.wait(for: "message on the restarted server") { events in
            events.lazy.compactMap { $0.message(from: second.id) }.first
        }
        #expect(message == .text("again"))
    }

    @Test func `binding a port that is in use fails with listenFailed`() throws {
        let server = try WebSocketServer()
        defer { server.shutdown(grace: .zero) }
        #expect {
            try WebSocketServer(options: WebSocketServerOptions(port: server.port))
        } throws: { error in
            guard case .listenFailed(let why) = error as? WebSocketError else { return false }
            return why.contains("lws_create_vhost") && why.contains("\(server.port)")
        }
    }

    @Test func `connecting to a closed port fails promptly with connectFailed`() async throws {
        let port = try closedLoopbackPort()
        let client = try WebSocketClient(url: WebSocketURL(parsing: "ws://127.0.0.1:\(port)/"))
        let events = EventRecorder(client.events)
        let start = ContinuousClock.now
        client.connect()
        // "Promptly": well before the 10 s connect timeout, with room for round 1's stalls.
        #expect(await events.waitForEnd(timeout: .seconds(6)))
        #expect(ContinuousClock.now - start < .seconds(6))
        #expect(events.events.count == 1)
        guard case .failed(.connectFailed(let why))? = events.events.first else {
            Issue.record("expected connectFailed, got \(events.events)")
            return
        }
        #expect(!why.isEmpty)
        #expect(client.waitUntilStopped(timeout: .seconds(5)))
    }

    @Test func `close before connect ends the stream and connect then does nothing`() async throws {
        let client = try WebSocketClient(url: WebSocketURL(parsing: "ws://127.0.0.1:9/"))
        let events = EventRecorder(client.events)
        client.close(code: 1000, reason: "never mind")
        client.connect()
        client.send(.text("dropped"))
        #expect(await events.waitForEnd())
        guard case .closed(1000, "never mind")? = events.events.first, events.events.count == 1 else {
            Issue.record("expected a single .closed, got \(events.events)")
            return
        }
    }

    @Test func `twenty connect and close cycles leave no thread or core behind`() async throws {
        let server = try WebSocketServer()
        defer { server.shutdown(grace: .zero) }
        let url = try WebSocketURL(parsing: "ws://127.0.0.1:\(server.port)/")
        for cycle in 0..<20 {
            weak var weakCore: ClientCore?
            do {
                let client = try WebSocketClient(url: url)
                weakCore = client.core
                let events = EventRecorder(client.events)
                client.connect()
                _ = await events.wait(for: "cycle \(cycle) opened") { $0.contains(where: \.isOpened) ? true : nil }
                client.send(.text("cycle \(cycle)"))
                client.close(code: 1000, reason: "cycle \(cycle)")
                #expect(await events.waitForEnd())
                #expect(client.waitUntilStopped(timeout: .seconds(5)), "service thread of cycle \(cycle) did not stop")
            }
            // The thread held the only other reference; once it has exited the core must go.
            let deadline = ContinuousClock.now + .seconds(2)
            while weakCore != nil && ContinuousClock.now < deadline { try await Task.sleep(for: .milliseconds(5)) }
            #expect(weakCore == nil, "cycle \(cycle) leaked its ClientCore")
        }
        let serverSaw = await EventRecorder(server.events).wait(for: "20 messages at the server") { events in
            events.compactMap { event -> WebSocketMessage? in if case .message(_, let m) = event { m } else { nil } }.count >= 20 ? true : nil
        }
        #expect(serverSaw == true)
        let remaining = await Self.waitUntil(timeout: .seconds(2)) { server.connectionIDs.isEmpty }
        #expect(remaining)
    }

    @Test func `releasing a connected client closes its connection with 1001`() async throws {
        let server = try WebSocketServer()
        defer { server.shutdown(grace: .zero) }
        let serverEvents = EventRecorder(server.events)
        var client: WebSocketClient? = try WebSocketClient(url: WebSocketURL(parsing: "ws://127.0.0.1:\(server.port)/"))
        weak let weakCore = client?.core
        let clientEvents = EventRecorder(client!.events)
        client!.connect()
        _ = await clientEvents.wait(for: "opened") { $0.contains(where: \.isOpened) ? true : nil }
        client = nil
        let end = await serverEvents.wait(for: "server disconnect") { events in
            events.lazy.compactMap { event -> Int?? in if case .disconnected(_, let code, _) = event { code } else { nil } }.first
        }
        #expect(end == 1001)
        #expect(await clientEvents.waitForEnd())
        let gone = await Self.waitUntil(timeout: .seconds(2)) { weakCore == nil }
        #expect(gone)
    }

    static func waitUntil(timeout: Duration, _ condition: () -> Bool) async -> Bool {
        let deadline = ContinuousClock.now + timeout
        while !condition() {
            if ContinuousClock.now >= deadline { return false }
            try? await Task.sleep(for: .milliseconds(5))
        }
        return true
    }
}
