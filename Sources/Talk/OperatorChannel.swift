// What Talk needs from the gateway: requests on the operator session, and whether it is up.

import Foundation
public import GatewayClient
public import GatewayProtocol

/// The operator side of the gateway link, as Talk uses it. GatewaySession is the real one.
public protocol OperatorChannel: Sendable {
    func request(_ method: String, params: JSONValue?, timeoutMs: Int64?) async throws -> JSONValue
    /// Whether the session is connected right now.
    func connected() async -> Bool
    /// `features.methods` from the last hello-ok (empty when unknown).
    func advertisedMethods() async -> [String]
    /// The gateway's main session key, when it named one.
    func mainSessionKey() async -> String?
    /// Puts a request on the wire and returns its response to await later; requests sent one
    /// after another from one task leave in that order.
    func send(_ method: String, params: JSONValue?, timeoutMs: Int64?) async throws -> PendingResponse
}

extension OperatorChannel {
    /// Channels without pipelining answer each request before the next leaves: still in order.
    public func send(_ method: String, params: JSONValue?, timeoutMs: Int64?) async throws -> PendingResponse {
        let r = PendingResponse()
        do { r.resolve(.success(try await request(method, params: params, timeoutMs: timeoutMs))) } catch { r.resolve(.failure(error)) }
        return r
    }
}

extension GatewaySession: OperatorChannel {
    public func connected() async -> Bool { isConnected }
    public func advertisedMethods() async -> [String] { currentHello()?.methods ?? [] }
    /// The resolved default Talk target (issue 26, D2), else hello-ok's main session.
    public func mainSessionKey() async -> String? { defaultSessionKey() }
}

/// Whether an error from the gateway means "this method is not here" rather than a failure of the call.
func isMethodUnavailable(_ error: any Error) -> Bool {
    guard case GatewayRequestError.failed(let shape) = error else { return false }
    if shape.code == "UNAVAILABLE" { return true }
    return shape.code == "INVALID_REQUEST" && shape.message.lowercased().contains("unknown method")
}
