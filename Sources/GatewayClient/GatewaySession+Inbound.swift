// GatewaySession's inbound side: socket events of the current generation, frames decoded and
// routed (the challenge, hello-ok, responses to pending requests, events, node.invoke.request
// and its cancel), and each invoke run as a child of the loop under its InvokeLatch.

import ClawvoiceCore
import Dispatch
import Foundation
import GatewayCrypto
import GatewayProtocol
import Store
import WebSocketTransport

extension GatewaySession {
    // MARK: inbound

    func socketEvent(_ event: WebSocketEvent, generation gen: Int) {
        guard gen == generation else { return }  // a late callback from a replaced socket
        switch event {
        case .opened:
            log.log(.debug, component, "socket open")
        case .message(let message):
            let size: Int
            switch message {
            case .text(let s): size = s.utf8.count
            case .binary(let b): size = b.count
            }
            receive(message, generation: gen)
            // Megabytes were decoded and (mostly) dropped again: hand the heap back (issue 11).
            if size >= 1 << 20 { ProcessMemory.trim() }
        case .closed(let code, let reason):
            teardownSocket()
            perform(machine.handle(.socketClosed(code: code, reason: reason), nowMs: nowMs, random: Double.random(in: 0..<1)))
        case .failed(let error):
            teardownSocket()
            let permanent: Bool
            if case .tlsPinMismatch = error { permanent = true } else { permanent = false }
            perform(machine.handle(.socketFailed(message: "\(error)", permanent: permanent), nowMs: nowMs, random: Double.random(in: 0..<1)))
        }
    }

    func receive(_ message: WebSocketMessage, generation gen: Int) {
        let frame: GatewayFrame
        do {
            switch message {
            case .text(let s): frame = try GatewayFrame.decode(s)
            case .binary(let b): frame = try GatewayFrame.decode(b)
            }
        } catch {
            // A bad frame is logged and skipped; it still proves the gateway is alive.
            log.log(.warning, component, "\(error); ignored")
            perform(machine.handle(.inbound, nowMs: nowMs))
            return
        }
        handle(frame, generation: gen)
    }

    func handle(_ frame: GatewayFrame, generation gen: Int) {
        switch frame {
        case .event(let e) where e.event == GatewayEvent.challenge:
            guard machine.phase == .opening else { return }
            guard let challenge = ConnectChallenge(payload: e.payload) else {
                log.log(.warning, component, "connect.challenge without a usable nonce and ts; ignored")
                return
            }
            perform(machine.handle(.challenge(challenge), nowMs: nowMs))
        case .response(let r) where r.id == connectRequestId:
            connectRequestId = nil
            if r.ok, let h = HelloOk(payload: r.payload) {
                perform(machine.handle(.helloOk(h), nowMs: nowMs))
            } else {
                let error = r.error ?? ErrorShape(code: "INVALID_REQUEST", message: "hello-ok payload not understood")
                perform(machine.handle(.connectRejected(error), nowMs: nowMs, random: Double.random(in: 0..<1)))
            }
        case .response(let r):
            perform(machine.handle(.inbound, nowMs: nowMs))
            guard let cont = pending.removeValue(forKey: r.id) else {
                log.log(.debug, component, "response for unknown request \(r.id); ignored")
                return
            }
            if r.ok { cont.resolve(.success(r.payload ?? .null)) }
            else { cont.resolve(.failure(GatewayRequestError.failed(r.error ?? ErrorShape(code: "UNKNOWN", message: "failed")))) }
        case .event(let e):
            perform(machine.handle(.inbound, nowMs: nowMs))
            guard machine.phase == .connected else { return }
            if let seq = e.seq {
                if let last = lastSeq, seq > last + 1 {
                    log.log(.info, component, "event gap: expected seq \(last + 1), got \(seq)")
                }
                lastSeq = seq
            }
            switch e.event {
            case GatewayEvent.tick:
                break
            case GatewayEvent.shutdown:
                let s = ShutdownEvent(payload: e.payload)
                log.log(.info, component, "gateway shutting down: \(s?.reason ?? "no reason")")
                perform(machine.handle(.shutdownNotice(restartExpectedMs: s?.restartExpectedMs), nowMs: nowMs))
            case GatewayEvent.nodeInvokeRequest where role == .node:
                invoke(e.payload, generation: gen)
            case GatewayEvent.nodeInvokeCancel where role == .node:
                if let c = NodeInvokeCancel(payload: e.payload), let running = invokes.removeValue(forKey: c.invokeId) {
                    log.log(.info, component, "invoke \(c.invokeId) cancelled by the gateway")
                    running.signal.end(.cancelled)
                    running.stop.finish()
                }
            default:
                onEvent(e)
            }
        case .request(let r):
            perform(machine.handle(.inbound, nowMs: nowMs))
            log.log(.debug, component, "unexpected request \(r.method) from the gateway; ignored")
        case .cancel:
            perform(machine.handle(.inbound, nowMs: nowMs))
        }
    }

    func invoke(_ payload: JSONValue?, generation gen: Int) {
        guard let request = NodeInvokeRequest(payload: payload) else {
            // With an id it can still be answered; the gateway would otherwise wait for its timeout.
            if let id = NodeInvokeRequest.idOfUnusable(payload: payload) {
                log.log(.warning, component, "node.invoke.request \(id) without a command; answered INVALID_REQUEST")
                send(.request(RequestFrame(id: UUID().uuidString.lowercased(), method: GatewayMethod.nodeInvokeResult,
                                           params: try? JSONValue(encoding: NodeInvokeResult.failure(id: id, nodeId: identity.deviceId,
                                               error: NodeInvokeError(code: .invalidRequest, message: "node.invoke.request without a command"))))),
                     generation: gen)
            } else {
                log.log(.warning, component, "node.invoke.request without an id; ignored")
            }
            return
        }
        let nodeId = identity.deviceId
        guard let commands else {
            send(.request(RequestFrame(id: UUID().uuidString.lowercased(), method: GatewayMethod.nodeInvokeResult,
                                       params: try? JSONValue(encoding: NodeInvokeResult.failure(id: request.id, nodeId: nodeId,
                                           error: NodeInvokeError(code: .invalidRequest, message: "no commands"))))), generation: gen)
            return
        }
        // The answer leaves when the timeout says, not when the handler stops (InvokeLatch).
        // A child of the loop's group; node.invoke.cancel or a lost socket finishes `stop`, which
        // cancels the handler (the group cannot cancel one child on its own).
        let signal = InvokeSignal()
        let (stopped, stop) = AsyncStream.makeStream(of: Void.self)
        jobs.append { [self] in
            await withTaskGroup(of: Void.self) { group in
                group.addTask {
                    await InvokeLatch.run(request, nodeId: nodeId, timeoutMs: request.timeoutMs ?? 30_000, signal: signal,
                                          handler: { await commands.handle(request, nodeId: nodeId) },
                                          answer: { await self.finishInvoke(request, $0, generation: gen) })
                }
                group.addTask { for await _ in stopped {} }
                await group.next()
                group.cancelAll()
            }
            await invokeStopped(request.id, signal)
        }
        invokes[request.id] = (stop, signal)
    }

    func invokeStopped(_ id: String, _ signal: InvokeSignal) {
        if invokes[id]?.signal === signal { invokes.removeValue(forKey: id) }
    }

    func finishInvoke(_ request: NodeInvokeRequest, _ result: NodeInvokeResult, generation gen: Int) {
        if !result.ok { log.log(.info, component, "\(request.command) → \(result.error?.message ?? "failed")") }
        // Results go back only on the socket that received the request; a replaced socket's work is dropped.
        guard let params = try? JSONValue(encoding: result) else { return }
        send(.request(RequestFrame(id: UUID().uuidString.lowercased(), method: GatewayMethod.nodeInvokeResult, params: params)),
             generation: gen)
    }

}
