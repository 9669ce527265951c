// JSONDepth: a linear pre-scan that refuses JSON nested deeper than a limit before any
// recursive decoder sees it. Foundation's decoder recurses per level (a 34,000-deep text
// overflows the stack) and a JSONValue tree built 512 deep costs over a second of CPU.

/// Nesting-depth guard for JSON arriving from outside (gateway frames, payloadJSON, setup codes).
public enum JSONDepth {
    /// Deepest nesting accepted from the gateway. Real frames stay under 15 levels; 100 is allowed (a test holds it).
    public static let gatewayLimit = 128

    /// Where `bytes` first nests deeper than `limit`: the byte offset of the bracket that opens
    /// level `limit + 1`, or nil when the text stays within it. Brackets inside strings do not count.
    public static func firstExcess(_ bytes: some Collection<UInt8>, limit: Int) -> Int? {
        var depth = 0
        var inString = false
        var escaped = false
        var offset = 0
        for b in bytes {
            defer { offset += 1 }
            if inString {
                if escaped { escaped = false } else if b == UInt8(ascii: "\\") { escaped = true } else if b == UInt8(ascii: "\"") { inString = false }
                continue
            }
            switch b {
            case UInt8(ascii: "\""): inString = true
            case UInt8(ascii: "["), UInt8(ascii: "{"):
                depth += 1
                if depth > limit { return offset }
            case UInt8(ascii: "]"), UInt8(ascii: "}"): depth -= 1
            default: break
            }
        }
        return nil
    }

    /// Throws when `bytes` nests deeper than `limit`.
    public static func check(_ bytes: some Collection<UInt8>, limit: Int = gatewayLimit) throws(TooDeep) {
        if let at = firstExcess(bytes, limit: limit) { throw TooDeep(limit: limit, offset: at) }
    }

    public struct TooDeep: Error, Sendable, Equatable, CustomStringConvertible {
        public var limit: Int
        public var offset: Int
        public var description: String { "JSON nested deeper than \(limit) levels (at byte \(offset))" }
    }
}
