// talk.start / talk.stop as node commands (protocol-drift-2026-12b.md D7): params exactly `{}`
// (else INVALID_PARAMS "<command> accepts only {}"), the room node's payloads, UNAVAILABLE as an
// error. The decision is the CallMachine's; `start`/`stop` post to whatever executor runs it.

public import ClawvoiceCore
public import GatewayClient
import GatewayProtocol

public enum CallCommands {
    public static let names = ["talk.start", "talk.stop"]

    /// Registers both commands. Still outside the gateway's built-in allowlist: the gateway
    /// needs `gateway.nodes.commands.allow` for them (D7).
    public static func register(on registry: NodeCommandRegistry,
                                start: @escaping @Sendable () async -> CallMachine.Answer,
                                stop: @escaping @Sendable () async -> CallMachine.Answer) {
        registry.register("talk.start") { _, params in try await payload(command: "talk.start", params: params, start) }
        registry.register("talk.stop") { _, params in try await payload(command: "talk.stop", params: params, stop) }
    }

    private static func payload(command: String, params: JSONValue,
                                _ run: @Sendable () async -> CallMachine.Answer) async throws -> JSONValue {
        if let refusal = CallCommandParams.refusal(command: command, params: params) {
            throw NodeInvokeError(code: .invalidParams, message: refusal)
        }
        return try await run().result.get()
    }
}
