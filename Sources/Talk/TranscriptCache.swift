// Keeping the transcript cache fresh: chat.history on the operator session → parsed messages →
// one replacing write to the store. The CLI reads the store directly; this actor is the only
// writer in the daemon. It also finds the message `clawvoice listen` asks for.

import ClawvoiceCore
public import Foundation
public import GatewayClient
public import GatewayProtocol
public import Store

/// Refreshes cached sessions from `chat.history` and looks messages up for Listen.
///
/// Message ids: the gateway's own id (`id`, `messageId`, or `__openclaw.id`) when the message
/// has one; otherwise the synthetic `<sessionKey>#<position>`, where position is the 0-based
/// index in the page chat.history returned. A synthetic id is stable while the session has fewer
/// messages than the page limit (positions then count from the session's first message); once
/// older messages scroll out of the page, the same id names a newer message. Gateways that send
/// ids never hit this.
public actor TranscriptSync {
    /// How many messages one refresh asks for (chat.history `limit`).
    public static let pageLimit = 100
    /// chat.history answers from the gateway's transcript files; 15 s is generous.
    public static let requestTimeoutMs: Int64 = 15_000

    private let store: ClawStore
    private let gateway: String
    private let channel: any OperatorChannel
    private let log: LogSink
    private let now: @Sendable () -> Int64
    /// One refresh per session at a time; concurrent callers wait for its result here.
    private var inFlight: [String: [CheckedContinuation<Result<[CachedMessage], any Error>, Never>]] = [:]

    public init(store: ClawStore, gateway: String, channel: any OperatorChannel, log: LogSink,
                now: @escaping @Sendable () -> Int64 = { Int64(Date().timeIntervalSince1970 * 1000) }) {
        self.store = store
        self.gateway = gateway
        self.channel = channel
        self.log = log
        self.now = now
    }

    /// Fetches the session's newest page and replaces its cache. Returns the cached messages.
    /// - Throws: the gateway's error (not connected, FORBIDDEN, timeout) or a `StoreError`;
    ///   the cache keeps its previous content then.
    public func refresh(sessionKey: String) async throws -> [CachedMessage] {
        if inFlight[sessionKey] != nil {
            // Another caller is fetching this session: its result is ours.
            return try await withCheckedContinuation { inFlight[sessionKey, default: []].append($0) }.get()
        }
        inFlight[sessionKey] = []
        let result: Result<[CachedMessage], any Error>
        do {
            let params: JSONValue = ["sessionKey": .string(sessionKey), "limit": .number(Double(Self.pageLimit))]
            let response = try await channel.request(GatewayMethod.chatHistory, params: params, timeoutMs: Self.requestTimeoutMs)
            let messages = Self.parse(history: response, sessionKey: sessionKey)
            try store.replaceCachedMessages(gateway: gateway, sessionKey: sessionKey, messages: messages, nowMs: now())
            result = .success(messages)
        } catch {
            result = .failure(error)
        }
        for waiter in inFlight.removeValue(forKey: sessionKey) ?? [] { waiter.resume(returning: result) }
        switch result {
        case .success(let messages):
            log.log(.debug, "history", "cached \(messages.count) messages of \(sessionKey)")
            return messages
        case .failure(let error):
            log.log(.info, "history", "chat.history for \(sessionKey) failed: \(error)")
            throw error
        }
    }

    /// The message `id`: from the cache, else after a refresh of the session it belongs to
    /// (the one a synthetic id names, else `sessionKey`). Nil when it is nowhere.
    public func findMessage(id: String, sessionKey: String) async -> (sessionKey: String, message: CachedMessage)? {
        if let hit = try? store.cachedMessage(gateway: gateway, messageId: id) { return hit }
        let key = Self.sessionKey(ofSyntheticId: id) ?? sessionKey
        _ = try? await refresh(sessionKey: key)
        return try? store.cachedMessage(gateway: gateway, messageId: id)
    }

    /// The newest assistant message of `sessionKey`: refreshed first when the gateway answers,
    /// else what the cache holds.
    public func lastAssistantMessage(sessionKey: String) async -> CachedMessage? {
        if await channel.connected() { _ = try? await refresh(sessionKey: sessionKey) }
        return try? store.lastAssistantMessage(gateway: gateway, sessionKey: sessionKey)
    }

    // MARK: Parsing

    /// Parses a chat.history payload (`{sessionKey, messages[]}`, or a bare array) into cache
    /// rows. Robust by design: unknown fields are ignored, a message without a role is
    /// "unknown", text comes from `content` (a string, or the `text` of its text parts) or `text`.
    public static func parse(history: JSONValue, sessionKey: String) -> [CachedMessage] {
        let list = history["messages"]?.arrayValue ?? history.arrayValue ?? []
        var out: [CachedMessage] = []
        for raw in list {
            guard case .object = raw else { continue }
            // Some transcript shapes wrap the message: {type:"message", id, timestamp, message:{role, content}}.
            let inner = raw["role"] == nil && raw["message"]?.objectValue != nil ? raw["message"]! : raw
            let position = out.count
            let id = identifier(inner) ?? identifier(raw) ?? "\(sessionKey)#\(position)"
            out.append(CachedMessage(
                position: position, messageId: id,
                role: inner["role"]?.stringValue ?? "unknown",
                text: text(of: inner),
                timestampMs: milliseconds(inner["timestamp"] ?? raw["timestamp"] ?? inner["createdAt"]),
                idempotencyKey: nonEmpty(inner["idempotencyKey"]?.stringValue ?? raw["idempotencyKey"]?.stringValue),
                runId: nonEmpty(inner["runId"]?.stringValue ?? raw["runId"]?.stringValue)))
        }
        return out
    }

    /// `<sessionKey>` of a synthetic `<sessionKey>#<position>` id.
    public static func sessionKey(ofSyntheticId id: String) -> String? {
        guard let hash = id.lastIndex(of: "#"), hash > id.startIndex,
              Int(id[id.index(after: hash)...]) != nil else { return nil }
        return String(id[..<hash])
    }

    static func text(of message: JSONValue) -> String {
        if let s = message["content"]?.stringValue { return s }
        if let parts = message["content"]?.arrayValue {
            let texts = parts.compactMap { part -> String? in
                if let s = part.stringValue { return s }
                let type = part["type"]?.stringValue
                guard type == nil || type == "text" || type == "output_text" else { return nil }
                return part["text"]?.stringValue
            }
            if !texts.isEmpty { return texts.joined(separator: "\n") }
        }
        return message["text"]?.stringValue ?? ""
    }

    static func identifier(_ m: JSONValue) -> String? {
        for v in [m["id"], m["messageId"], m["__openclaw"]?["id"]] {
            if let s = v?.stringValue, !s.isEmpty { return s }
            if let n = v?.intValue { return String(n) }
        }
        return nil
    }

    /// Unix milliseconds from a number (milliseconds, or seconds when it is too small to be
    /// milliseconds of this century) or an ISO 8601 string.
    static func milliseconds(_ v: JSONValue?) -> Int64? {
        if let n = v?.doubleValue {
            return Int64((n < 100_000_000_000 ? n * 1000 : n).rounded())
        }
        guard let s = v?.stringValue else { return nil }
        let f = ISO8601DateFormatter()
        f.formatOptions = [.withInternetDateTime, .withFractionalSeconds]
        if let d = f.date(from: s) { return Int64((d.timeIntervalSince1970 * 1000).rounded()) }
        f.formatOptions = [.withInternetDateTime]
        return f.date(from: s).map { Int64(($0.timeIntervalSince1970 * 1000).rounded()) }
    }

    private static func nonEmpty(_ s: String?) -> String? { s?.isEmpty == false ? s : nil }
}
