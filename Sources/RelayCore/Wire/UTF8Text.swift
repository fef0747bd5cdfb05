/// UTF-8 validation for text frames (RFC 6455 §8.1: a text frame that is not valid UTF-8 fails
/// the connection, close code 1007). The relay does this itself rather than with lws's
/// `LWS_SERVER_OPTION_VALIDATE_UTF8`, which walks every byte through a state table (~9
/// instructions a byte, 14 % of a forwarded event under callgrind): text frames are almost all
/// ASCII, which this checks eight bytes at a time.
public enum UTF8Text {
    /// Whether `bytes` is valid UTF-8 (RFC 3629: no overlong forms, no surrogates, nothing past
    /// U+10FFFF).
    public static func isValid(_ bytes: UnsafeBufferPointer<UInt8>) -> Bool {
        guard let base = bytes.baseAddress else { return true }
        let count = bytes.count
        let raw = UnsafeRawPointer(base)
        @inline(__always) func ascii32(_ at: Int) -> Bool {
            (raw.loadUnaligned(fromByteOffset: at, as: UInt64.self) | raw.loadUnaligned(fromByteOffset: at + 8, as: UInt64.self)
                | raw.loadUnaligned(fromByteOffset: at + 16, as: UInt64.self)
                | raw.loadUnaligned(fromByteOffset: at + 24, as: UInt64.self)) & 0x8080_8080_8080_8080 == 0
        }
        var i = 0
        // All ASCII, the usual message: whole 32-byte blocks, then the last 32 bytes (overlapping
        // the block before) instead of a tail checked a word and a byte at a time.
        if count >= 32 {
            while count - i >= 32, ascii32(i) { i += 32 }
            if count - i < 32, ascii32(count - 32) { return true }
        }
        while i < count {
            // ASCII four words, then a word, at a time: no byte has its high bit set.
            while count - i >= 32, ascii32(i) { i += 32 }
            while count - i >= 8, raw.loadUnaligned(fromByteOffset: i, as: UInt64.self) & 0x8080_8080_8080_8080 == 0 {
                i += 8
            }
            while i < count, base[i] < 0x80 { i += 1 }
            guard i < count else { return true }
            let length = sequenceLength(bytes, at: i)
            guard length > 0 else { return false }
            i += length
        }
        return true
    }

    public static func isValid(_ bytes: [UInt8]) -> Bool { bytes.withUnsafeBufferPointer { isValid($0) } }

    /// The length of the multi-byte sequence whose lead byte is `bytes[i]` (≥ 0x80), or 0 when
    /// it is not a valid one.
    public static func sequenceLength(_ bytes: UnsafeBufferPointer<UInt8>, at i: Int) -> Int {
        let count: Int
        var low: UInt8 = 0x80
        var high: UInt8 = 0xBF
        switch bytes[i] {
        case 0xC2...0xDF: count = 2
        case 0xE0: count = 3; low = 0xA0
        case 0xE1...0xEC, 0xEE...0xEF: count = 3
        case 0xED: count = 3; high = 0x9F
        case 0xF0: count = 4; low = 0x90
        case 0xF1...0xF3: count = 4
        case 0xF4: count = 4; high = 0x8F
        default: return 0
        }
        guard bytes.count - i >= count, bytes[i + 1] >= low, bytes[i + 1] <= high else { return 0 }
        for k in 2..<count where bytes[i + k] & 0xC0 != 0x80 { return 0 }
        return count
    }
}
