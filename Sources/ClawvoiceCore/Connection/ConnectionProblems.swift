// What a person is told when the gateway refuses the connection in a way retrying cannot fix:
// one line saying what went wrong and the next step, and how a protocol mismatch is recognised.

import Foundation
public import GatewayProtocol

/// A stop in the retry loop that a person must resolve, as one line plus the next step.
public struct ConnectionProblem: Sendable, Equatable, CustomStringConvertible {
    public var code: String
    public var summary: String
    public var nextStep: String
    public init(code: String, summary: String, nextStep: String) {
        self.code = code
        self.summary = summary
        self.nextStep = nextStep
    }
    public var description: String { "\(summary); \(nextStep)" }
}

/// A connect rejected because the gateway cannot serve the offered protocol range, in any of the
/// shapes gateways send: the current `{code:"PROTOCOL_MISMATCH", expectedProtocol, …}`, the
/// released-v3 `details:{expectedProtocol:3}` with no `code`, or a `PROTOCOL_MISMATCH` that names
/// no version. The rule for retrying is the official clients' (openclaw-gateway-client
/// `is_expected_protocol_mismatch`): `details.expectedProtocol` must be given, and either
/// `details.code` is `PROTOCOL_MISMATCH` or the message says "protocol mismatch".
public struct ProtocolMismatch: Sendable, Equatable {
    /// The version the gateway asks for, when it names one.
    public var expectedProtocol: Int?

    public init?(_ error: ErrorShape) {
        let detail = error.detailCode
        let expected = error.details?["expectedProtocol"]?.intValue.map(Int.init)
        let saysMismatch = error.message.trimmingCharacters(in: .whitespacesAndNewlines).lowercased().contains("protocol mismatch")
        if detail == "PROTOCOL_MISMATCH" || (detail == nil && saysMismatch && expected != nil) {
            expectedProtocol = expected
        } else {
            return nil
        }
    }

    /// Whether one retry with exactly `version`…`version` can help: the gateway named that version
    /// and the rejection is recognisably a protocol mismatch.
    public func permitsFallback(to version: Int) -> Bool { expectedProtocol == version }
}

extension ConnectionMachine {
    static func mismatchProblem(_ m: ProtocolMismatch, fellBack: Bool, legacyAllowed: Bool) -> ConnectionProblem {
        let expected = m.expectedProtocol.map(String.init) ?? "another version"
        let ours = !legacyAllowed ? "4" : fellBack ? "3–4 (3 was tried on its own too)" : "3–4"
        return ConnectionProblem(code: "PROTOCOL_MISMATCH", summary: "the gateway speaks protocol \(expected), this session speaks \(ours)",
                                 nextStep: "update the gateway or clawvoice")
    }

    /// Rejections that retrying cannot fix: one line saying what to change.
    public static func problem(for error: ErrorShape) -> ConnectionProblem? {
        let detail = error.detailCode ?? ""
        func p(_ summary: String, _ next: String) -> ConnectionProblem {
            ConnectionProblem(code: detail.isEmpty ? error.code : detail, summary: summary, nextStep: next)
        }
        switch detail {
        case "AUTH_TOKEN_MISSING", "AUTH_REQUIRED":
            return p("the gateway requires a token", "pair again with `clawvoice pair --url URL --token-file FILE` (the gateway's auth token) or a setup code")
        case "AUTH_TOKEN_MISMATCH":
            return p("the gateway rejected the shared token", "set the right token (`gateway.token` or CLAWVOICE_GATEWAY_TOKEN) or pair again with a setup code")
        case "AUTH_TOKEN_NOT_CONFIGURED":
            return p("the gateway has no shared token configured", "pair with a setup code (`openclaw qr` on the gateway host) or use --password")
        case "AUTH_PASSWORD_MISSING", "AUTH_PASSWORD_MISMATCH", "AUTH_PASSWORD_NOT_CONFIGURED":
            return p("the gateway rejected the password (\(detail))", "pair again with `clawvoice pair --url URL --password-file FILE`")
        case "AUTH_BOOTSTRAP_TOKEN_INVALID":
            return p("the setup code was already used or has expired", "make a new one with `openclaw qr` on the gateway host and run `clawvoice pair CODE`")
        case "AUTH_SCOPE_MISMATCH":
            return p("the gateway refused the requested scopes", "approve the device's operator scopes with `openclaw devices list` / `openclaw devices approve ID`")
        case "PROTOCOL_MISMATCH":
            if let m = ProtocolMismatch(error) { return mismatchProblem(m, fellBack: false, legacyAllowed: true) }
        case "DEVICE_IDENTITY_REQUIRED", "CONTROL_UI_DEVICE_IDENTITY_REQUIRED":
            return p("the gateway did not accept the device identity", "check that the gateway is an OpenClaw gateway and report this as a bug")
        case "DEVICE_AUTH_SIGNATURE_INVALID", "DEVICE_AUTH_DEVICE_ID_MISMATCH", "DEVICE_AUTH_PUBLIC_KEY_INVALID",
             "DEVICE_AUTH_NONCE_REQUIRED", "DEVICE_AUTH_NONCE_MISMATCH", "DEVICE_AUTH_INVALID":
            return p("the gateway rejected the device proof (\(detail))", "report this as a bug with `clawvoice --version` and the gateway version")
        case "DEVICE_AUTH_SIGNATURE_EXPIRED":
            return p("the gateway says the signature is stale", "check that this machine's clock and the gateway's agree")
        case "CONTROL_UI_ORIGIN_NOT_ALLOWED":
            return p("the gateway refused the connection's origin", "connect directly, not through a proxy that adds an Origin header")
        default:
            break
        }
        if detail.hasPrefix("AUTH_") {
            return p("the gateway refused the credentials (\(detail): \(error.message))", "check the token or password, or pair again")
        }
        if error.code == "INVALID_REQUEST" && (error.message.contains("invalid connect params") || error.message.contains("invalid role")) {
            return p("the gateway rejected the connect request (\(error.message))", "this gateway version may be incompatible; update it or clawvoice")
        }
        return nil
    }
}
