// PreRollBuffer: the last few hundred milliseconds of capture kept while nobody is listening, so
// a capture that starts on a key press or wake word also has the syllable spoken just before it.
// Pure value: a ring of whole frames.

public import ClawvoiceCore

/// A ring buffer of the most recent capture frames, up to `capacityMilliseconds` (0–2000 ms).
public struct PreRollBuffer: Sendable {
    /// The longest pre-roll accepted; more would mostly add stale room noise to every utterance.
    public static let maximumMilliseconds = 2_000

    /// The configured length, clamped to 0…2000 ms.
    public let capacityMilliseconds: Int
    /// How many frames that is (rounded up, so 50 ms of 20 ms frames keeps 3).
    public let capacityFrames: Int

    private var ring: [PCMBuffer?]
    private var head = 0  // index of the oldest frame
    public private(set) var count = 0

    /// - Parameters:
    ///   - milliseconds: how much audio to keep; clamped to 0…2000.
    ///   - frameMilliseconds: the length of each appended frame (20 for capture frames).
    public init(milliseconds: Int, frameMilliseconds: Int = 20) {
        capacityMilliseconds = min(max(milliseconds, 0), Self.maximumMilliseconds)
        let frameMs = max(frameMilliseconds, 1)
        capacityFrames = (capacityMilliseconds + frameMs - 1) / frameMs
        ring = Array(repeating: nil, count: capacityFrames)
    }

    public var isEmpty: Bool { count == 0 }

    /// The audio held, in milliseconds (from the frames' own formats).
    public var durationMilliseconds: Double {
        (0..<count).reduce(0) { $0 + (ring[(head + $1) % capacityFrames]?.durationMilliseconds ?? 0) }
    }

    /// Keeps `frame`, dropping the oldest one when full. With capacity 0 it keeps nothing.
    public mutating func append(_ frame: PCMBuffer) {
        guard capacityFrames > 0 else { return }
        if count < capacityFrames {
            ring[(head + count) % capacityFrames] = frame
            count += 1
        } else {
            ring[head] = frame
            head = (head + 1) % capacityFrames
        }
    }

    /// Returns the frames held, oldest first, and empties the buffer.
    public mutating func drain() -> [PCMBuffer] {
        var frames: [PCMBuffer] = []
        frames.reserveCapacity(count)
        for i in 0..<count {
            let slot = (head + i) % capacityFrames
            if let frame = ring[slot] { frames.append(frame) }
            ring[slot] = nil
        }
        head = 0
        count = 0
        return frames
    }

    /// Empties the buffer.
    public mutating func removeAll() { _ = drain() }
}
