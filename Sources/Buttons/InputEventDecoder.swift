// Owns: the byte format of /dev/input/event* and of recorded streams. Raw `struct input_event`
// records in, events and key edges out. Pure: no I/O, so the live reader and the recorded
// stream go through exactly this code, and tests feed it bytes in any slicing they like.

internal import CEvdev
public import ClawvoiceCore
import Glibc

/// One evdev event: what a single `struct input_event` record holds.
public struct InputEvent: Sendable, Equatable, CustomStringConvertible {
    /// Bytes per record: `MemoryLayout<input_event>.size`, 24 on 64-bit Linux
    /// (timeval 16, type 2, code 2, value 4).
    public static let byteCount = MemoryLayout<input_event>.size

    /// EV_SYN: the end of one report (code SYN_REPORT) or lost events (code SYN_DROPPED).
    public static let synType = UInt16(EV_SYN)
    /// EV_KEY: a key or button; value 1 down, 0 up, 2 auto-repeat.
    public static let keyType = UInt16(EV_KEY)
    /// EV_MSC: scan codes that many keyboards send before the EV_KEY.
    public static let mscType = UInt16(EV_MSC)
    /// SYN_REPORT: events since the last report belong together.
    public static let synReport = UInt16(SYN_REPORT)
    /// SYN_DROPPED: the kernel's buffer overflowed; events up to the next SYN_REPORT are
    /// incomplete and device state must be re-read.
    public static let synDropped = UInt16(SYN_DROPPED)

    /// The event's timestamp (the device clock, CLOCK_REALTIME unless changed with
    /// EVIOCSCLOCKID), from the record's timeval. Informational; nothing here depends on it.
    public var time: Duration
    public var type: UInt16
    public var code: UInt16
    public var value: Int32

    public init(type: UInt16, code: UInt16, value: Int32, time: Duration = .zero) {
        self.type = type
        self.code = code
        self.value = value
        self.time = time
    }

    /// An EV_KEY event: value 1 down, 0 up, 2 repeat.
    public static func key(_ code: UInt16, value: Int32, time: Duration = .zero) -> InputEvent {
        InputEvent(type: keyType, code: code, value: value, time: time)
    }

    /// An EV_SYN / SYN_REPORT event.
    public static func report(time: Duration = .zero) -> InputEvent {
        InputEvent(type: synType, code: synReport, value: 0, time: time)
    }

    /// The record exactly as read(2) returns it from an evdev node: one `struct input_event`
    /// in this machine's layout and byte order.
    public func encoded() -> [UInt8] {
        var raw = input_event()
        let (seconds, attoseconds) = time.components
        raw.time.tv_sec = Int(seconds)
        raw.time.tv_usec = Int(attoseconds / 1_000_000_000_000)
        raw.type = type
        raw.code = code
        raw.value = value
        return withUnsafeBytes(of: &raw) { Array($0) }
    }

    init(_ raw: input_event) {
        // Durations are 128-bit, so even a garbage timeval cannot overflow here.
        time = .seconds(Int64(raw.time.tv_sec)) + .microseconds(Int64(raw.time.tv_usec))
        type = raw.type
        code = raw.code
        value = raw.value
    }

    public var description: String {
        let typeName = libevdev_event_type_get_name(UInt32(type)).map { String(cString: $0) } ?? "type \(type)"
        let codeName = libevdev_event_code_get_name(UInt32(type), UInt32(code)).map { String(cString: $0) } ?? "code \(code)"
        return "\(typeName) \(codeName) \(value)"
    }
}

/// Decodes a stream of `struct input_event` records incrementally, and picks out the edges of
/// one key.
///
/// Reads may end anywhere (a fifo, a file read in odd chunks, a byte at a time): a record that
/// is not complete yet is held until the rest arrives. The format has no framing, so bytes that
/// are not events still decode as (nonsense) events; only EV_KEY events for `keyCode` with
/// value 0, 1 or 2 become edges, so nonsense never starts a capture by accident unless it
/// happens to spell exactly that.
public struct InputEventDecoder: Sendable {
    /// The push-to-talk key's code.
    public let keyCode: UInt16
    private var pending: [UInt8] = []

    public init(keyCode: UInt16) {
        self.keyCode = keyCode
    }

    /// Bytes of an incomplete record held for the next call (always < `InputEvent.byteCount`).
    public var pendingByteCount: Int { pending.count }

    /// Appends bytes and returns every record they complete, in order.
    public mutating func decode(_ bytes: some Sequence<UInt8>) -> [InputEvent] {
        pending.append(contentsOf: bytes)
        let size = InputEvent.byteCount
        let whole = pending.count / size
        guard whole > 0 else { return [] }
        var events: [InputEvent] = []
        events.reserveCapacity(whole)
        pending.withUnsafeBytes { buffer in
            for index in 0..<whole {
                events.append(InputEvent(buffer.loadUnaligned(fromByteOffset: index * size, as: input_event.self)))
            }
        }
        pending.removeFirst(whole * size)
        return events
    }

    /// The edge an event means for the push-to-talk key, or nil when it is about something else.
    public func edge(for event: InputEvent) -> KeyEdge? {
        guard event.type == InputEvent.keyType, event.code == keyCode else { return nil }
        switch event.value {
        case 1: return .down
        case 0: return .up
        case 2: return .repeat
        default: return nil
        }
    }

    /// `decode` then `edge`: the key's edges among the records these bytes complete.
    public mutating func edges(from bytes: some Sequence<UInt8>) -> [KeyEdge] {
        decode(bytes).compactMap { edge(for: $0) }
    }

    /// Forgets a held partial record (the stream it came from has ended).
    public mutating func reset() {
        pending.removeAll()
    }
}
