// PairDiagnosis: why an address did not answer as an OpenClaw gateway, as one line naming the
// URL tried and what to fix. Pure: the probes (GatewayProbe.swift) gather what they saw, these
// values decide the words. libwebsockets' own words never reach the user.

import ClawvoiceCore
import Daemon
import Foundation
import GatewayCrypto
import NodeRuntime
import WebSocketTransport

/// What one WebSocket look at a gateway URL saw.
enum ProbeResult: Sendable, Equatable {
    /// connect.challenge: an OpenClaw gateway.
    case gateway
    /// The TCP connection did not come up (the transport's words, for the log only).
    case notConnected(String)
    /// TCP came up but the TLS handshake failed (wss://).
    case tlsFailed(String)
    /// The certificate did not verify or did not match the pin (the server speaks TLS).
    case certificate(String)
    /// An HTTP server answered the upgrade with something else (status line).
    case upgradeRefused(String)
    /// The server closed before the WebSocket opened (e.g. TLS bytes to a plain server).
    case closedBeforeOpen
    /// The WebSocket opened and the first message was not connect.challenge (a short excerpt).
    case otherMessage(String)
    /// The WebSocket opened and the server closed it without a challenge.
    case closedAfterOpen(code: Int?, reason: String)
    /// Opened, but no connect.challenge within the time limit.
    case silent(seconds: Int)
    /// Nothing decided within the time limit and the socket never opened.
    case noAnswer(seconds: Int)

    /// Sorts the transport's failure into what it means; the strings are WebSocketClient's.
    static func from(_ error: WebSocketError, opened: Bool) -> ProbeResult {
        switch error {
        case .tlsPinMismatch(let expected, let actual):
            return .certificate("its certificate is \(actual), not the pinned \(expected)")
        case .untrustedCertificate(_, let reason, _):
            return .certificate(reason)
        case .connectFailed(let why):
            if why.hasPrefix("TLS handshake") { return .tlsFailed(why) }
            if why.hasPrefix("WebSocket upgrade") {
                // "WebSocket upgrade to URL refused: <reason>"
                let reason = why.range(of: "refused: ").map { String(why[$0.upperBound...]) } ?? why
                return .upgradeRefused(reason)
            }
            if why.contains("closed the connection before the WebSocket opened") { return .closedBeforeOpen }
            if why.hasPrefix("no ") && why.contains("handshake from") { return .noAnswer(seconds: 0) }
            return .notConnected(why)
        case .protocolViolation(let why):
            return opened ? .otherMessage(why) : .upgradeRefused(why)
        default:
            return .notConnected("\(error)")
        }
    }
}

/// What a plain TCP connect to the gateway's host and port found (asked only when the WebSocket
/// probe could not say why it failed).
enum TCPResult: Sendable, Equatable {
    case connected
    /// The name did not resolve; `temporary` when the resolver could not be asked (EAI_AGAIN).
    case unresolved(temporary: Bool)
    case refused
    /// No route (EHOSTUNREACH, ENETUNREACH): the errno text.
    case unreachable(String)
    case timedOut(seconds: Int)
    case failed(String)
}

enum PairDiagnosis {
    /// The one line for `url`: what was tried, what happened, what to do. `tcp` is the plain TCP
    /// check (nil if not made); `otherScheme` says whether the same host and port answered with the
    /// other scheme (wss:// for ws://, ws:// for wss://), nil if not asked.
    static func line(url: String, probe: ProbeResult, tcp: TCPResult?, otherScheme: Bool?) -> String {
        let (host, port, secure) = parts(url)
        let other = swapScheme(url)
        func tried(_ s: String) -> String { "\(url): \(s)" }
        switch probe {
        case .gateway:
            return tried("an OpenClaw gateway answers")
        case .certificate(let why):
            return tried("the TLS certificate was refused (\(why)); check the --tls-fingerprint, or pair with a setup code")
        case .tlsFailed(let why):
            if otherScheme == true {
                return tried("the server does not speak TLS, but a gateway answers on plain \(other); use that URL (off this machine, only with --allow-insecure on a network you trust)")
            }
            return tried("the TLS handshake failed (\(tlsReason(why))); check that the gateway serves TLS on port \(port), or use ws:// if it has none")
        case .closedBeforeOpen where !secure && otherScheme == true,
             .upgradeRefused where !secure && otherScheme == true,
             .noAnswer where !secure && otherScheme == true:
            return tried("the server there speaks TLS; use \(other)")
        case .upgradeRefused(let status):
            return tried("an HTTP server answers on port \(port), but it is not an OpenClaw gateway (the WebSocket upgrade got \(status)); check the port (OpenClaw listens on 18789)")
        case .otherMessage(let excerpt):
            return tried("a WebSocket server answers, but it is not an OpenClaw gateway (it sent \(excerpt) instead of connect.challenge); check the host and port")
        case .closedAfterOpen(let code, let reason):
            let how = "closed the WebSocket (\(code.map(String.init) ?? "no code")\(reason.isEmpty ? "" : " \(reason)"))"
            return tried("a WebSocket server answers, but it \(how) without a connect.challenge: not an OpenClaw gateway; check the host and port")
        case .silent(let s):
            return tried("a WebSocket server answers, but sent no connect.challenge within \(s) s: not an OpenClaw gateway; check the host and port")
        case .closedBeforeOpen, .notConnected, .noAnswer:
            break
        }
        // The WebSocket never opened: the TCP check says why.
        switch tcp {
        case .unresolved(false)?:
            return tried("no such host \(host); check the spelling, or use the gateway's IP address")
        case .unresolved(true)?:
            return tried("cannot look up \(host) (the DNS server did not answer); check this machine's network, or use the gateway's IP address")
        case .refused?:
            return tried("connection refused: nothing listens on \(host) port \(port); check the port (OpenClaw listens on 18789) and that the gateway is running")
        case .unreachable(let why)?:
            return tried("no route to \(host) (\(why)); check the address, and that this machine is on the gateway's network (or VPN)")
        case .timedOut(let s)?:
            return tried("no answer from \(host) port \(port) within \(s) s; check the address, that the host is up, and that its firewall lets port \(port) through")
        case .failed(let why)?:
            return tried("cannot connect to \(host) port \(port) (\(why)); check the address")
        case .connected?, nil:
            if secure {
                return tried("the server closed the connection during the TLS handshake; check that the gateway serves TLS on port \(port), or use ws://")
            }
            return tried("the server closed the connection before the WebSocket opened: not an OpenClaw gateway, or it wants TLS (wss://); check the host and port")
        }
    }

    /// A short, user-facing reason from OpenSSL's words (e.g. "wrong version number").
    static func tlsReason(_ why: String) -> String {
        for known in ["wrong version number", "unexpected eof", "packet length too long", "record layer failure", "unsupported protocol"]
        where why.lowercased().contains(known) { return known }
        return "no TLS answer"
    }

    static func parts(_ url: String) -> (host: String, port: Int, secure: Bool) {
        if let u = try? WebSocketURL(parsing: url) { return (u.host, u.port, u.secure) }
        let c = URLComponents(string: url)
        let secure = c?.scheme?.lowercased() == "wss"
        return (c?.host ?? url, c?.port ?? (secure ? 443 : 80), secure)
    }

    /// The same URL with ws:// and wss:// swapped.
    static func swapScheme(_ url: String) -> String {
        let lower = url.lowercased()
        if lower.hasPrefix("wss://") { return "ws://" + url.dropFirst(6) }
        if lower.hasPrefix("ws://") { return "wss://" + url.dropFirst(5) }
        return url
    }
}

/// What `pair` says while it waits, decided from both roles' statuses (nil: nothing is pending,
/// so nothing is said). Pure, so the words can be tested without waiting 30 s.
enum PairProgress {
    static func line(node: SessionStatusView?, operator op: SessionStatusView?, waitedSeconds: Int) -> String? {
        let roles = [("node", node), ("operator", op)]
        let pending = roles.compactMap { name, s -> String? in
            guard let s, s.state == "pairing", let id = s.requestId else { return nil }
            return "\(name) (request \(id))"
        }
        if !pending.isEmpty {
            return "still waiting for approval of \(pending.joined(separator: " and ")) on the gateway (\(waitedSeconds) s)…"
        }
        let retrying = roles.compactMap { name, s -> String? in
            guard let s, s.state == "waiting" || s.state == "connecting" else { return nil }
            return "\(name): \(s.detail)"
        }
        if !retrying.isEmpty { return "still connecting (\(waitedSeconds) s): \(retrying.joined(separator: "; "))" }
        return nil
    }

    /// The parts of a session status this needs.
    struct SessionStatusView: Equatable {
        var state: String
        var detail: String
        var requestId: String?
    }
}
