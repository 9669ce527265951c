// Which chat session a talk turn goes to, as a pure decision, for the talk core to call
// (issue 12, item 1). A turn the gateway invoked (`talk.ptt.*`) goes to the session the gateway
// stamped on the `node.invoke.request` (its top-level `sessionKey`: the session of the agent run
// that called the node), and its reply is followed there. Without one (`null`, or a gateway from
// before July 2026 that sends no key) it goes where a local turn goes: the current session
// (`clawvoice session use`, config `talk.sessionKey`), else the gateway's main session.
// A `sessionKey` inside the command's params never counts (NodeInvokeRequest does not read it).

public import GatewayProtocol

public enum TurnSession {
    /// - Parameters:
    ///   - invoke: the invoke's stamped key; nil for a turn that did not come from an invoke
    ///     (the button, the CLI, a wake word, which has its own routing).
    ///   - current: the session local turns use now, if one was chosen.
    ///   - main: `hello-ok`'s `sessionDefaults.mainSessionKey`.
    public static func resolve(invoke: InvokeSessionKey?, current: String?, main: String?) -> String? {
        if let key = invoke?.key { return key }
        return current ?? main
    }
}
