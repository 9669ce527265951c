// InvokeEnd: why the gateway stopped waiting for a node.invoke (GatewayClient's InvokeLatch
// decides it; the talk machine takes it as an input).

/// Why the gateway stopped waiting for an invoke.
public enum InvokeEnd: String, Sendable, Equatable {
    /// `node.invoke.cancel` named it.
    case cancelled
    /// Its `timeoutMs` passed; "node invoke timed out" has been answered.
    case timedOut = "timed out"
    /// The node's socket went away: no answer can reach the gateway any more.
    case disconnected
}
