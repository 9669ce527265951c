// A loopback gateway with a connected operator session and a throwaway store: the setup the
// benches share (the tests build their own, with their own logs and timings).

import ClawvoiceCore
import Foundation
public import GatewayClient
import GatewayCrypto
public import GatewayProtocol
public import LoopbackGateway
import NodeRuntime
public import Store

public struct LoopbackOperator: Sendable {
    public let gateway: LoopbackGateway
    public let store: ClawStore
    public let session: GatewaySession
    public let directory: String
    public static let gatewayName = "bench"

    /// Starts an auto-approving loopback gateway and connects an operator session to it.
    public static func connect(events: @escaping @Sendable (EventFrame) -> Void = { _ in },
                               configure: (inout LoopbackGateway.Configuration) -> Void = { _ in }) async throws -> LoopbackOperator {
        var gc = LoopbackGateway.Configuration()
        gc.autoApprove = true
        gc.auth = .token("bench")
        gc.echoDeltaDelayMs = 1
        configure(&gc)
        let gateway = LoopbackGateway(configuration: gc)
        try await gateway.start()
        let dir = FileManager.default.temporaryDirectory.appendingPathComponent("cv-bench-\(UUID().uuidString.prefix(8))").path
        let store = try ClawStore(directory: dir)
        let (identity, instanceId) = try store.loadOrCreateIdentity()
        let url = await gateway.url
        try store.upsertGateway(GatewayRecord(name: gatewayName, url: url, sharedToken: "bench", isActive: true, addedAtMs: 0))
        let session = GatewaySession(role: .operator, endpoint: GatewayEndpoint(name: gatewayName, url: url),
                                     credentials: GatewayCredentials(sharedToken: "bench"), identity: identity,
                                     instanceId: instanceId, store: store,
                                     options: SessionOptions(displayName: "bench", version: ClawvoiceVersion.current),
                                     log: .silent, onEvent: events)
        await session.start()
        guard await session.waitUntilSettled(timeout: .seconds(10)).state == .connected else {
            await gateway.stop()
            throw ConfigError("the bench's operator session did not connect to the loopback gateway")
        }
        return LoopbackOperator(gateway: gateway, store: store, session: session, directory: dir)
    }

    public func close() async {
        await session.stop()
        await gateway.stop()
        try? FileManager.default.removeItem(atPath: directory)
    }
}
