// The executor of CallMachine (issue 23): it owns the clock and the effects the machine asks
// for. The call's session from the operator session's resolved TalkTarget, frozen for the call
// (D2); talk.client.create / talk.client.close on the operator session (D1, D5); the offer POSTed
// with the grant's single-use secret and the answer set on a WebRTCPeer; link events, talk.event
// `session.closed`, operator state and gateway switches as inputs; capture PCM into the call and
// received audio out to `play`, never after the end. An actor whose `run()` owns every task it
// needs: the tick and each slow effect (a request, the offer, a peer's pumps) are children of
// its task group, handed over through one inbox (`spawn`). The gateway relay (§2.4) carries the call when
// WebRTC is not offered or fails before it connects: PCM16 24 kHz both ways over the operator
// socket (CallService+Relay.swift).

public import ClawvoiceCore
import Foundation
import GatewayClient
public import GatewayProtocol

public actor CallService {
    /// What the service reaches outside itself; closures, so the daemon and the tests each wire their own.
    public struct Edges: Sendable {
        /// A request on the operator session: the payload, or a `CallMachine.Failure` (or any error).
        public var request: @Sendable (_ method: String, _ params: JSONValue) async throws -> JSONValue
        /// The call's session (D2), resolved once per call.
        public var resolveTarget: @Sendable () async -> Result<CallMachine.Target, CallMachine.Failure>
        /// The gateway's HTTP origin for the offer POST (the WS URL's, or an override).
        public var httpOrigin: @Sendable () async -> String?
        /// The SHA-256 the https offer endpoint's certificate must have (the gateway's pin, for
        /// the gateway's own host); nil: the system CAs and the host name.
        public var offerTLSPin: @Sendable () async -> String?
        /// Received call audio, mono Int16 at the service's rate, for the speaker.
        public var play: @Sendable ([Int16]) -> Void
        public var event: @Sendable (CallEvent) -> Void
        public var log: @Sendable (String) -> Void
        /// Drop what the speaker still holds of the call's audio (a barge-in on the relay).
        public var flushPlayback: @Sendable () -> Void

        public init(request: @escaping @Sendable (String, JSONValue) async throws -> JSONValue,
                    resolveTarget: @escaping @Sendable () async -> Result<CallMachine.Target, CallMachine.Failure>,
                    httpOrigin: @escaping @Sendable () async -> String?,
                    play: @escaping @Sendable ([Int16]) -> Void,
                    event: @escaping @Sendable (CallEvent) -> Void = { _ in },
                    log: @escaping @Sendable (String) -> Void = { _ in },
                    flushPlayback: @escaping @Sendable () -> Void = {},
                    offerTLSPin: @escaping @Sendable () async -> String? = { nil }) {
            self.request = request
            self.offerTLSPin = offerTLSPin
            self.resolveTarget = resolveTarget
            self.httpOrigin = httpOrigin
            self.play = play
            self.event = event
            self.log = log
            self.flushPlayback = flushPlayback
        }
    }

    public let sampleRate: Int
    let edges: Edges
    private let localAddress: String?
    private var machine: CallMachine
    private let clock = ContinuousClock()
    private let epoch: ContinuousClock.Instant
    private var nextToken = 0
    private var waiting: [Int: CheckedContinuation<CallMachine.Answer, Never>] = [:]
    private var answered: [Int: CallMachine.Answer] = [:]
    private var peer: (callId: String, peer: WebRTCPeer)?
    /// Work for `run()`'s task group: effects that wait (requests, the offer, media pumps).
    private let jobs: AsyncStream<@Sendable () async -> Void>
    private let jobSink: AsyncStream<@Sendable () async -> Void>.Continuation
    /// The media of this call is live: capture goes in, received audio goes out.
    private var mediaCallId: String?
    private var lastActivityReportMs: Int64 = 0
    /// The relay session carrying the live call, and the appendAudio requests still unanswered.
    var relay: (callId: String, sessionId: String)?
    var relayInFlight = 0
    var relayDropped = 0
    /// Relay output: its current turn, when its audio last came and since when it plays; the
    /// turns cancelled by a barge-in (their later audio is dropped: the turnId fence, D8).
    var relayTurn: String?
    var relayLastAudioMs: Int64 = 0
    var relayTurnStartMs: Int64 = 0
    var relayLoudMs = 0
    var lastBargeInMs: Int64 = -10_000
    var cancelledTurns: Set<String> = []
    public internal(set) var status = CallStatus()

    /// `localAddress`: gather ICE candidates on that address only (the loopback tests use 127.0.0.1).
    public init(sampleRate: Int = 16_000, settings: CallMachine.Settings = CallService.defaultSettings,
                localAddress: String? = nil, edges: Edges) {
        self.sampleRate = sampleRate
        self.edges = edges
        self.localAddress = localAddress
        self.machine = CallMachine(settings: settings)
        self.epoch = clock.now
        (jobs, jobSink) = AsyncStream.makeStream()
    }

    public static var defaultSettings: CallMachine.Settings { CallMachine.Settings() }

    var nowMs: Int64 {
        let d = clock.now - epoch
        return d.components.seconds * 1000 + d.components.attoseconds / 1_000_000_000_000_000
    }

    /// The machine's timers and every effect that waits, as children; returns when the task is
    /// cancelled (the children with it). Call it once.
    public func run() async {
        await withDiscardingTaskGroup { group in
            group.addTask {
                while !Task.isCancelled {
                    try? await Task.sleep(for: .milliseconds(200))
                    await self.handle(.tick)
                }
            }
            // Ends when the task is cancelled: an AsyncStream's iteration stops then.
            for await job in jobs { group.addTask(operation: job) }
            group.cancelAll()
        }
        shutdownMedia()
    }

    /// Runs `job` as a child of `run()`'s group (queued until `run()` takes it).
    func spawn(_ job: @escaping @Sendable () async -> Void) { jobSink.yield(job) }

    public var isActive: Bool { machine.isActive }
    public var phaseName: String { machine.phase.name }

    // MARK: inputs

    /// talk.start, a trigger or `clawvoice call`.
    public func start(origin: CallMachine.Origin) async -> CallMachine.Answer {
        let token = newToken()
        handle(.start(token: token, origin: origin, callId: "call-" + String(UUID().uuidString.prefix(8)).lowercased()))
        return await answer(token)
    }

    /// talk.stop (`.talkStop`) or hangup (`.hangup`).
    public func stop(cause: CallMachine.EndCause) async -> CallMachine.Answer {
        let token = newToken()
        handle(.stop(token: token, cause: cause))
        return await answer(token)
    }

    public func operatorState(connected: Bool, incarnation: Int) { handle(.operatorState(connected: connected, incarnation: incarnation)) }
    public func offer(_ o: CallOffer) { handle(.offer(o)); status.offer = o }
    public func gatewaySwitched() { handle(.gatewaySwitched) }
    /// A `talk.event` payload from the operator session.
    public func talkEvent(_ payload: JSONValue?) {
        if relayEvent(payload) { return }
        if let e = CallTalkEvent(payload: payload) { handle(.talkEvent(e)) }
    }

    /// One capture frame (mono Int16 at `sampleRate`, echo-cancelled upstream): into the call when it is live.
    public func capture(_ pcm: [Int16]) {
        if let id = mediaCallId, let r = relay, r.callId == id { relaySend(r, pcm); noteActivity(id, pcm); return }
        guard let id = mediaCallId, let p = peer, p.callId == id else { return }
        p.peer.send(pcm)
        noteActivity(id, pcm)
    }

    // MARK: the machine

    private func newToken() -> Int { nextToken += 1; return nextToken }

    private func answer(_ token: Int) async -> CallMachine.Answer {
        if let a = answered.removeValue(forKey: token) { return a }
        return await withCheckedContinuation { waiting[token] = $0 }
    }

    func handle(_ input: CallMachine.Input) {
        let actions = machine.handle(input, nowMs: nowMs)
        for a in actions { perform(a) }
        status.phase = machine.phase.name
        status.callId = machine.phase.call?.id
        status.path = machine.phase.call?.path.rawValue
        status.sessionKey = machine.phase.call?.target?.sessionKey
    }

    private func perform(_ action: CallMachine.Action) {
        switch action {
        case .answer(let token, let a):
            if let w = waiting.removeValue(forKey: token) { w.resume(returning: a) } else { answered[token] = a }
        case .resolveTarget(let id):
            // The first step of every new call: from here on it holds the room.
            edges.event(.dialing(callId: id))
            spawn { [edges] in let r = await edges.resolveTarget(); await self.handle(.targetResolved(callId: id, r)) }
        case .sendCreate(let id, let params):
            spawn { [edges] in
                do { await self.handle(.created(callId: id, .success(try await edges.request("talk.client.create", params)))) }
                catch { await self.handle(.created(callId: id, .failure(Self.failure(error)))) }
            }
        case .postOffer(let id, let grant): postOffer(id, grant)
        case .openRelay(let id, let target): openRelay(id, target)
        case .callStarted(let id, let path):
            mediaCallId = id
            if path == .relay, let sid = machine.phase.call?.sessionId {
                relay = (id, sid)
                relayInFlight = 0
                relayTurn = nil
                cancelledTurns = []
            }
            status.connectedCalls += 1
            if let c = machine.phase.call { edges.event(.started(callId: id, path: path, origin: c.origin, sessionKey: c.target?.sessionKey ?? "")) }
        case .stopMedia(let id):
            if mediaCallId == id { mediaCallId = nil }
            if relay?.callId == id { relay = nil }
            if peer?.callId == id { shutdownMedia() }
        case .closeClient(let id, let key, let sid):
            spawn { [edges] in
                do { _ = try await edges.request("talk.client.close", CallCreateResult.closeParams(sessionKey: key, voiceSessionId: sid)) }
                catch { edges.log("call \(id): talk.client.close failed: \(error)") }
                await self.handle(.closed(callId: id, sessionId: sid))
            }
        case .closeRelay(let id, let sid):
            spawn { [edges] in
                _ = try? await edges.request("talk.session.close", ["sessionId": .string(sid)])
                await self.handle(.closed(callId: id, sessionId: sid))
            }
        case .callEnded(let id, let path, let cause):
            status.lastEnd = CallStatus.End(callId: id, path: path.rawValue, cause: cause.name, detail: CallStatus.detail(cause))
            edges.event(.ended(callId: id, path: path, cause: cause))
        case .upgradeRequired(let why):
            status.upgradeRequired = why
            edges.event(.upgradeRequired(why))
        case .log(let line): edges.log(line)
        }
    }

    /// The peer, the offer, the POST, the answer; link events and received audio pumped into the machine.
    private func postOffer(_ id: String, _ grant: CallGrant) {
        let rtc: WebRTCPeer
        do { rtc = try WebRTCPeer(sampleRate: sampleRate, localAddress: localAddress) } catch {
            handle(.answered(callId: id, error: "\(error)"))
            return
        }
        shutdownMedia()
        peer = (id, rtc)
        // The pumps end when the peer closes (its streams finish) or run() is cancelled.
        spawn {
            for await e in rtc.events {
                switch e {
                case .connected: await self.handle(.link(callId: id, .connected))
                case .disconnected: await self.handle(.link(callId: id, .disconnected))
                case .failed(let why): await self.handle(.link(callId: id, .failed(why)))
                case .remoteAudio, .closed: break
                }
            }
        }
        spawn {
            for await chunk in rtc.audio { await self.received(id, chunk) }
        }
        spawn { [edges] in
            do {
                let offer = try await rtc.createOffer()
                guard let origin = await edges.httpOrigin() else { throw WebRTCError("no HTTP origin for the gateway's offer route") }
                let answer = try await OfferExchange.post(origin: origin, path: grant.offerPath, secret: grant.clientSecret,
                                                          headers: grant.offerHeaders, offer: offer, tlsPin: await edges.offerTLSPin())
                try rtc.setAnswer(answer)
                await self.handle(.answered(callId: id, error: nil))
            } catch {
                await self.handle(.answered(callId: id, error: "\(error)"))
            }
        }
    }

    func received(_ id: String, _ chunk: [Int16]) {
        guard mediaCallId == id else { return }  // nothing plays after the end, nor before the start
        edges.play(chunk)
        noteActivity(id, chunk)
    }

    /// Speech either way keeps the call alive; reported at most twice a second.
    private func noteActivity(_ id: String, _ pcm: [Int16]) {
        let now = nowMs
        guard now - lastActivityReportMs >= 500, Self.isVoice(pcm) else { return }
        lastActivityReportMs = now
        handle(.activity(callId: id))
    }

    static func isVoice(_ pcm: [Int16]) -> Bool {
        guard !pcm.isEmpty else { return false }
        let energy = pcm.reduce(0.0) { $0 + Double($1) * Double($1) } / Double(pcm.count)
        return energy > 327.68 * 327.68  // -40 dBFS
    }

    private func shutdownMedia() {
        peer?.peer.close()
        peer = nil
    }

    static func failure(_ error: any Error) -> CallMachine.Failure {
        if let f = error as? CallMachine.Failure { return f }
        if case .failed(let e)? = error as? GatewayRequestError { return CallMachine.Failure(code: e.code, message: e.message) }
        return CallMachine.Failure(code: "UNAVAILABLE", message: "\(error)")
    }

}

/// What the service tells the rest of the node.
public enum CallEvent: Sendable, Equatable {
    /// A call is being set up (target, create, offer): the room is taken already.
    case dialing(callId: String)
    case started(callId: String, path: CallMachine.Path, origin: CallMachine.Origin, sessionKey: String)
    case ended(callId: String, path: CallMachine.Path, cause: CallMachine.EndCause)
    case upgradeRequired(String)
}

/// The call as `status` shows it.
public struct CallStatus: Sendable, Equatable, Codable {
    public struct End: Sendable, Equatable, Codable {
        public var callId: String
        public var path: String
        public var cause: String
        public var detail: String?
    }
    public var phase = "idle"
    public var callId: String?
    /// "webrtc" or "relay": which path the call took.
    public var path: String?
    public var sessionKey: String?
    public var lastEnd: End?
    /// Why the gateway cannot hold a Gateway-controlled call, once seen.
    public var upgradeRequired: String?
    public var connectedCalls = 0
    /// Relay answers cut short by talking over them.
    public var bargeIns = 0
    public var offer: CallOffer?
    public init() {}

    /// The detail an end cause carries (link failure, upgrade reason, setup error), if any.
    public static func detail(_ cause: CallMachine.EndCause) -> String? {
        switch cause {
        case .linkFailed(let s), .upgradeRequired(let s), .unavailable(let s), .setupFailed(let s), .timedOut(let s): return s
        default: return nil
        }
    }
}
