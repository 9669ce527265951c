// What the daemon keeps per gateway and the small pieces its parts share: the gateway scope (both
// sessions, the outbox, the transcript cache), the late-bound operator channel, `audio devices`
// as JSON, and a wait for cancellation.

package import Audio
import ClawvoiceCore
import Foundation
import GatewayClient
import GatewayCrypto
package import GatewayProtocol
import NodeRuntime
import Realtime
import Store
import Talk

/// What the daemon keeps for the active gateway: both sessions, the outbox and the transcript
/// cache. Switching or forgetting a gateway replaces this in place; everything else runs on.
final class GatewayScope: Sendable {
    package let record: GatewayRecord
    package let link: GatewayLink
    package let outbox: OutboxSender
    let transcripts: TranscriptSync

    /// `history-refresh` requests (session keys): each refresh runs as a child of the scope's group.
    private let refreshes: AsyncStream<String>
    private let refreshSink: AsyncStream<String>.Continuation

    init(record: GatewayRecord, link: GatewayLink, outbox: OutboxSender, transcripts: TranscriptSync) {
        self.record = record
        self.link = link
        self.outbox = outbox
        self.transcripts = transcripts
        (refreshes, refreshSink) = AsyncStream.makeStream(of: String.self)
    }

    /// Asks for the history of `sessionKey` to be read again; returns at once.
    func requestRefresh(sessionKey: String) { refreshSink.yield(sessionKey) }

    /// Carries out refresh requests until the scope is replaced (its group cancelled); a refresh
    /// is bounded by its request's timeout.
    func refreshService() async {
        await withDiscardingTaskGroup { group in
            for await key in refreshes {
                group.addTask { [transcripts] in _ = try? await transcripts.refresh(sessionKey: key) }
            }
        }
    }
}

/// The operator session, resolved after the link exists (the link needs the registry, the registry the controller).
struct LateOperatorChannel: OperatorChannel {
    let box: Locked<GatewaySession?>
    package func request(_ method: String, params: JSONValue?, timeoutMs: Int64?) async throws -> JSONValue {
        guard let s = box.withLock({ $0 }) else { throw GatewayRequestError.notConnected("starting") }
        return try await s.request(method, params: params, timeoutMs: timeoutMs)
    }
    package func connected() async -> Bool { await box.withLock({ $0 })?.isConnected ?? false }
    func advertisedMethods() async -> [String] { await box.withLock({ $0 })?.advertisedMethods() ?? [] }
    func mainSessionKey() async -> String? { await box.withLock({ $0 })?.mainSessionKey() }
    package func send(_ method: String, params: JSONValue?, timeoutMs: Int64?) async throws -> PendingResponse {
        guard let s = box.withLock({ $0 }) else { throw GatewayRequestError.notConnected("starting") }
        return try await s.send(method, params: params, timeoutMs: timeoutMs)
    }
}

/// `audio devices` as JSON: sources and sinks with their names.
package func devicesJSON(connection: PulseConnection) async -> JSONValue {
    do {
        try await connection.waitUntilReady(timeout: .seconds(3))
        let sources = try await connection.sources()
        let sinks = try await connection.sinks()
        func list(_ ds: [AudioDevice]) -> JSONValue {
            .array(ds.map { d in
                ["name": .string(d.name), "description": .string(d.description), "spec": .string(d.sampleSpec),
                 "monitor": .bool(d.isMonitor), "default": .bool(d.isDefault), "headset": .bool(d.isHeadset),
                 "port": d.activePortName.map { .string($0) } ?? .null]
            })
        }
        return ["ok": true, "sources": list(sources), "sinks": list(sinks)]
    } catch {
        return ["ok": false, "error": .string("no sound server: \(error)")]
    }
}

/// Suspends until the task is cancelled.
func untilCancelled() async {
    while !Task.isCancelled { try? await Task.sleep(for: .seconds(3600)) }
}
