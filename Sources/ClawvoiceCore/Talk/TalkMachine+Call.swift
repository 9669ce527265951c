// A realtime call as a talk state (issue 23): from `callStarted` to `callEnded` the call holds the
// room. Push-to-talk and wake captures are refused BUSY, frames are not heard for captures, wake
// or barge-in (the call carries the microphone), a capture or reply in progress when the call
// starts is cancelled, and a session or gateway switch ends the call (`endCall`). Mute keeps the
// call but closes its microphone (`callMicrophoneOpen`). Pure, like the rest of TalkMachine.

import Foundation

extension TalkMachine {
    /// Whether capture frames go into the call now.
    public var callMicrophoneOpen: Bool { call != nil && !muted }

    mutating func callStarted(_ id: String, out: inout [Action]) {
        guard call != id else { return }
        // The call takes the room: what was being captured or spoken stops.
        interrupt(reason: "a call started", out: &out)
        call = id
        out.append(.clearPreRoll)
        out.append(.resetWake)
        out.append(.log(.info, "talk", "call \(id) holds the room: push-to-talk and wake are refused until it ends"))
    }

    mutating func callEnded(_ id: String, out: inout [Action]) {
        guard call == id else { return }
        call = nil
        out.append(.cue(.callEnd))
        out.append(.resetWake)
        out.append(.log(.info, "talk", "call \(id) ended: push-to-talk and wake are back"))
    }

    /// The call's wake phrase (talk.callWakeWord) starts a call instead of a turn: no capture, no
    /// chime (the call's own start sound plays); the call service answers for the rest.
    mutating func callWakeStarts(phrase: String, out: inout [Action]) -> Bool {
        guard let p = settings.callWakePhrase, Self.samePhrase(p, phrase) else { return false }
        out.append(.wakeOutcome("call"))
        out.append(.resetWake)
        out.append(.clearPreRoll)
        out.append(.startCall(phrase: phrase))
        out.append(.log(.info, "wake", "\"\(phrase)\" starts a call"))
        return true
    }

    /// Case, spacing and an underscore-for-space (model names) aside.
    static func samePhrase(_ a: String, _ b: String) -> Bool {
        func norm(_ s: String) -> String {
            s.lowercased().replacingOccurrences(of: "_", with: " ").split(whereSeparator: \.isWhitespace).joined(separator: " ")
        }
        return norm(a) == norm(b)
    }

    /// start/once during a call: refused BUSY. stop/cancel pass (nothing is being captured).
    mutating func refusedInCall(_ command: Command, token: Int, freshId: String, out: inout [Action]) -> Bool {
        guard call != nil else { return false }
        switch command {
        case .start: out.append(.answer(token: token, .failed(.inCall)))
        case .once: out.append(.answer(token: token, .result(PTTResult(captureId: freshId, status: .busy))))
        case .stop, .cancel: return false
        }
        out.append(.log(.info, "talk", "push-to-talk refused: a call holds the room"))
        return true
    }
}
