// The realtime call's doors into the talk loop (issue 23): the call service reports a call's
// start and end here, and TalkMachine's `endCall` (a session or gateway switch) goes back out
// through the hook set with `onCallEnd`; the microphone goes to the call through `onCallFrames`.

import Audio
public import ClawvoiceCore

extension TalkController {
    /// Where `endCall` goes (the call service's hang-up).
    public func onCallEnd(_ hook: @escaping @Sendable (String) -> Void) async { await set(.onCallEnd(hook)) }

    /// Where the call's wake phrase (talk.callWakeWord) goes: the call service's start.
    public func onCallStart(_ hook: @escaping @Sendable (String) -> Void) async { await set(.onCallStart(hook)) }

    /// Where the microphone's frames go during a call (not while muted).
    public func onCallFrames(_ hook: @escaping @Sendable (PCMBuffer) -> Void) async { await set(.onCallFrame(hook)) }

    /// A call connected: it holds the room until `callEnded`.
    public func callStarted(id: String) async {
        send(.input(.callStarted(id: id)))
        await barrier()
    }

    public func callEnded(id: String) async {
        send(.input(.callEnded(id: id)))
        await barrier()
    }
}
