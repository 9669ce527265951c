// The node commands this device declares, and how an invoke reaches its handler.

import Synchronization
import Foundation
public import GatewayProtocol

/// A handler gets the request and its parsed params, and returns the result payload.
/// Throw `NodeInvokeError` to answer with a code; anything else becomes UNAVAILABLE.
public typealias NodeCommandHandler = @Sendable (NodeInvokeRequest, JSONValue) async throws -> JSONValue

/// Command name → handler. The declared list is what `connect.commands` claims.
public final class NodeCommandRegistry: Sendable {
    private let handlers: Mutex<[String: NodeCommandHandler]>
    private let order: Mutex<[String]>

    public init() {
        handlers = Mutex([:])
        order = Mutex([])
    }

    public func register(_ command: String, _ handler: @escaping NodeCommandHandler) {
        handlers.withLock { $0[command] = handler }
        order.withLock { if !$0.contains(command) { $0.append(command) } }
    }

    /// Declares a command whose implementation is not there yet: it answers UNAVAILABLE.
    public func registerUnavailable(_ command: String, reason: String) {
        register(command) { _, _ in throw NodeInvokeError(code: .unavailable, message: reason) }
    }

    public var declaredCommands: [String] { order.withLock { $0 } }

    /// Runs one invoke to completion; never throws, always yields one result.
    public func handle(_ request: NodeInvokeRequest, nodeId: String) async -> NodeInvokeResult {
        guard let handler = handlers.withLock({ $0[request.command] }) else {
            return .failure(id: request.id, nodeId: nodeId,
                            error: NodeInvokeError(code: .invalidRequest, message: "unknown command \"\(request.command)\""))
        }
        let params: JSONValue
        do { params = try request.params() } catch {
            return .failure(id: request.id, nodeId: nodeId, error: error)
        }
        do {
            let payload = try await handler(request, params)
            return .success(id: request.id, nodeId: nodeId, payload: payload)
        } catch let error as NodeInvokeError {
            return .failure(id: request.id, nodeId: nodeId, error: error)
        } catch is CancellationError {
            return .failure(id: request.id, nodeId: nodeId, error: NodeInvokeError(code: .unavailable, message: "invoke cancelled"))
        } catch {
            return .failure(id: request.id, nodeId: nodeId, error: NodeInvokeError(code: .unavailable, message: "\(error)"))
        }
    }
}
