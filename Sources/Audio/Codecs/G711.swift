// G711: ITU-T G.711 µ-law companding in Swift, for gateways whose transcription relay takes
// 8 kHz µ-law (talk-and-voice §2.2). Follows the ITU-T G.191 reference (ulaw_compress /
// ulaw_expand): 14-bit magnitude, bias 33, negative inputs folded by one's complement.

/// G.711 µ-law encode and decode of s16 samples.
public enum G711 {
    /// Encodes each s16 sample to one µ-law byte.
    public static func muLaw(encode samples: [Int16]) -> [UInt8] {
        samples.map(muLawByte)
    }

    /// Decodes µ-law bytes to s16 samples (the centre of each code's interval).
    public static func muLaw(decode bytes: [UInt8]) -> [Int16] {
        bytes.map { muLawDecodeTable[Int($0)] }
    }

    /// One sample to its µ-law code. 0 → 0xFF, 32767 → 0x80, -32768 → 0x00.
    public static func muLawByte(_ sample: Int16) -> UInt8 {
        // One's complement folds -1…-4 onto the same magnitude as 0…3, keeping the code table
        // symmetric; the 16-bit value is cut to G.711's 14-bit range by the shift.
        let value = Int(sample)
        var magnitude = (value < 0 ? ~value : value) >> 2
        magnitude = min(magnitude + 33, 0x1FFF)
        var segment = 1
        var rest = magnitude >> 6
        while rest != 0 { segment += 1; rest >>= 1 }
        let high = 8 - segment
        let low = 0x0F - ((magnitude >> segment) & 0x0F)
        var code = (high << 4) | low
        if value >= 0 { code |= 0x80 }
        return UInt8(code)
    }

    /// One µ-law code to its s16 value.
    public static func muLawSample(_ code: UInt8) -> Int16 { muLawDecodeTable[Int(code)] }

    private static let muLawDecodeTable: [Int16] = (0..<256).map { code in
        let sign = code < 0x80 ? -1 : 1
        let complement = ~code & 0xFF
        let exponent = (complement >> 4) & 0x07
        let mantissa = complement & 0x0F
        let step = 4 << (exponent + 1)
        return Int16(sign * ((0x80 << exponent) + step * mantissa + step / 2 - 4 * 33))
    }
}
