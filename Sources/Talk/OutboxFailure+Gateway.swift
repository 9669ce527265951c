// How a gateway request's error counts for the outbox: the edge between GatewayClient's errors
// and OutboxMachine's failure kinds (the machine itself knows no client types).

public import ClawvoiceCore
import GatewayClient
import GatewayProtocol

extension OutboxFailure {
    /// Sorts an error from `OperatorChannel.request`.
    public static func classify(_ error: any Error) -> OutboxFailure {
        let text = "\(error)".split(whereSeparator: \.isNewline).joined(separator: " ")
        guard let e = error as? GatewayRequestError else { return OutboxFailure(kind: .refused, message: text) }
        switch e {
        case .notConnected, .disconnected:
            return OutboxFailure(kind: .offline, message: text)
        case .timedOut:
            return OutboxFailure(kind: .refused, message: text)
        case .tooLarge:
            return OutboxFailure(kind: .permanent, message: text)
        case .failed(let shape):
            if shape.code == "INVALID_REQUEST" || shape.code == "FORBIDDEN" {
                return OutboxFailure(kind: .permanent, message: text)
            }
            return OutboxFailure(kind: .refused, message: text, retryAfterMs: shape.retryAfterMs)
        }
    }
}
