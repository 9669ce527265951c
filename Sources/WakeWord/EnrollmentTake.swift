// One take of `clawvoice wake enroll`, decided from levels alone: EnrollmentTakeListener cuts a
// take out of the microphone stream (waits for speech, keeps it with a little room either side,
// ends it after a pause), and EnrollmentTakeCheck refuses a take that is clipped, too quiet or
// silent, each with one line that says what to do. Pure values: 16 kHz mono samples in, events
// out; time is the number of samples fed.

import Foundation

public struct EnrollmentTakeListener: Sendable {
    public enum Event: Sendable, Equatable {
        /// Speech began (the meter may say so).
        case heard
        /// A take: from shortly before the speech to the pause after it.
        case take([Int16])
        /// No speech within `waitMilliseconds`.
        case nothingHeard
        /// Speech ran on past `maxSpeechMilliseconds` without a pause.
        case tooLong
    }

    public var waitMilliseconds = 8000
    public var maxSpeechMilliseconds = 3000
    /// Quiet after the speech that ends the take.
    public var pauseMilliseconds = 600
    /// Room kept before the speech began.
    public var leadMilliseconds = 400
    /// A 20 ms frame is speech when its RMS is this far over the quietest frame heard so far…
    public var overFloorDb = 12.0
    /// …and at least this loud.
    public var minimumDbfs = -55.0

    static let frame = 320
    private var pending: [Int16] = []
    private var lead: [Int16] = []
    private var take: [Int16] = []
    private var floorDb = 0.0
    private var waitedFrames = 0
    private var speechFrames = 0
    private var quietFrames = 0
    private var speaking = false
    private var speechRun = 0

    public init() {}

    /// Starts listening for the next take.
    public mutating func restart() {
        let keep = (waitMilliseconds, maxSpeechMilliseconds, pauseMilliseconds, leadMilliseconds, overFloorDb, minimumDbfs, floorDb)
        self = EnrollmentTakeListener()
        (waitMilliseconds, maxSpeechMilliseconds, pauseMilliseconds, leadMilliseconds, overFloorDb, minimumDbfs, floorDb) = keep
    }

    /// RMS of a frame in dBFS (−120 for digital silence).
    static func rmsDbfs(_ s: ArraySlice<Int16>) -> Double {
        guard !s.isEmpty else { return -120 }
        let sum = s.reduce(0.0) { $0 + Double($1) * Double($1) }
        return sum == 0 ? -120 : 10 * log10(sum / Double(s.count) / (32768.0 * 32768.0))
    }

    /// Feeds samples; returns what they decided (at most one take per call: the listener then
    /// waits for `restart`).
    public mutating func feed(_ samples: [Int16]) -> [Event] {
        pending += samples
        var out: [Event] = []
        while pending.count >= Self.frame {
            let f = Array(pending.prefix(Self.frame))
            pending.removeFirst(Self.frame)
            let db = Self.rmsDbfs(f[...])
            if !speaking {
                floorDb = waitedFrames == 0 && floorDb == 0 ? db : min(floorDb, db)
                waitedFrames += 1
                lead += f
                let keep = leadMilliseconds * 16
                if lead.count > keep { lead.removeFirst(lead.count - keep) }
                let loud = db >= max(floorDb + overFloorDb, minimumDbfs)
                speechRun = loud ? speechRun + 1 : 0
                if speechRun >= 2 {          // 40 ms of speech: not a click
                    speaking = true
                    take = lead
                    speechFrames = 2
                    out.append(.heard)
                } else if waitedFrames * 20 >= waitMilliseconds {
                    out.append(.nothingHeard)
                    pending.removeAll()
                    waitedFrames = 0
                    return out
                }
                continue
            }
            take += f
            let loud = db >= max(floorDb + overFloorDb, minimumDbfs)
            if loud { speechFrames += 1 + quietFrames; quietFrames = 0 } else { quietFrames += 1 }
            if speechFrames * 20 > maxSpeechMilliseconds {
                out.append(.tooLong)
                speaking = false
                pending.removeAll()
                return out
            }
            if quietFrames * 20 >= pauseMilliseconds {
                out.append(.take(take))
                speaking = false
                pending.removeAll()
                return out
            }
        }
        return out
    }
}

public enum EnrollmentTakeCheck {
    public enum Verdict: Sendable, Equatable {
        case ok(peakDbfs: Double, seconds: Double)
        case refused(String)
    }

    /// Peaks under this are too quiet to learn from.
    public static let quietDbfs = -35.0
    /// Samples this close to full scale count as clipped; this many of them refuse the take.
    public static let clipLevel: Int = 32_700
    public static let clippedSamples = 3

    /// The verdict on one take (16 kHz mono).
    public static func check(_ take: [Int16]) -> Verdict {
        var peak = 0, clipped = 0
        for s in take {
            let a = s == Int16.min ? 32768 : Int(abs(s))
            peak = max(peak, a)
            if a >= clipLevel { clipped += 1 }
        }
        if peak == 0 { return .refused("the take was silent: check the microphone is on and is the one used (clawvoice audio devices), then say it again") }
        let db = 20 * log10(Double(peak) / 32768)
        if clipped >= clippedSamples {
            return .refused("the take clipped (\(clipped) samples at full scale): say it a little softer or further from the microphone, or turn the input gain down")
        }
        if db < quietDbfs {
            return .refused(String(format: "the take was too quiet (peak %.0f dBFS, it needs %.0f): say it closer to the microphone or turn the input gain up", db, quietDbfs))
        }
        return .ok(peakDbfs: db, seconds: Double(take.count) / 16_000)
    }
}
