// The realtime call's doors into the talk loop (issue 23): the call service reports a call's
// start and end here, and TalkMachine's `endCall` (a session or gateway switch) goes back out
// through the hook set with `onCallEnd`; the microphone goes to the call through `onCallFrames`.

import Audio
import ClawvoiceCore

extension TalkController {
    /// Where `endCall` goes (the call service's hang-up).
    public nonisolated func onCallEnd(_ hook: @escaping @Sendable (String) -> Void) async {
        await onLoop { await $0.setOnEndCall(hook) }
    }

    private func setOnEndCall(_ hook: @escaping @Sendable (String) -> Void) { onEndCall = hook }

    /// Where the call's wake phrase (talk.callWakeWord) goes: the call service's start.
    public nonisolated func onCallStart(_ hook: @escaping @Sendable (String) -> Void) async {
        await onLoop { await $0.setOnStartCall(hook) }
    }

    private func setOnStartCall(_ hook: @escaping @Sendable (String) -> Void) { onStartCall = hook }

    /// Where the microphone's frames go during a call (not while muted).
    public nonisolated func onCallFrames(_ hook: @escaping @Sendable (PCMBuffer) -> Void) async {
        await onLoop { await $0.setOnCallFrame(hook) }
    }
    private func setOnCallFrame(_ hook: @escaping @Sendable (PCMBuffer) -> Void) { onCallFrame = hook }

    /// A call connected: it holds the room until `callEnded`.
    public nonisolated func callStarted(id: String) async {
        send(.input(.callStarted(id: id)))
        await barrier()
    }

    public nonisolated func callEnded(id: String) async {
        send(.input(.callEnded(id: id)))
        await barrier()
    }
}
