/// Ids the relay puts on the robot leg for exchanges it must match an answer to: rewritten
/// command ids (`"c…"`) and HTTP exchanges (`"h…"`). docs/protocol.md v1.2: not guessable from
/// outside — 64 random bits, written as 16 lower-case hex digits after the prefix — so nobody
/// but the robot that received one can answer it. Bytes in and out: this runs per command.
public enum ExchangeID {
    /// Length of an id's text: the prefix and 16 hex digits.
    public static let textLength = 17

    /// A fresh random id (the system's CSPRNG).
    public static func random() -> UInt64 {
        var generator = SystemRandomNumberGenerator()
        return generator.next()
    }

    /// Appends `prefix` and `id`'s 16 hex digits to `out`.
    public static func append(_ prefix: UInt8, _ id: UInt64, to out: inout [UInt8]) {
        withUnsafeTemporaryAllocation(of: UInt8.self, capacity: textLength) { text in
            text[0] = prefix
            for k in 1..<textLength {
                let digit = UInt8(truncatingIfNeeded: id >> UInt64(4 * (textLength - 1 - k))) & 0xF
                text[k] = digit < 10 ? 0x30 &+ digit : 0x57 &+ digit
            }
            out.append(contentsOf: text)
        }
    }

    /// `prefix` and `id` as the id's text: `c00ab…`.
    public static func text(_ prefix: UInt8, _ id: UInt64) -> String {
        var bytes: [UInt8] = []
        bytes.reserveCapacity(textLength)
        append(prefix, id, to: &bytes)
        return String(decoding: bytes, as: UTF8.self)
    }

    /// The id in `text` (`prefix` and 16 lower-case hex digits), nil for anything else.
    public static func parse(_ text: UnsafeBufferPointer<UInt8>, prefix: UInt8) -> UInt64? {
        guard text.count == textLength, text[0] == prefix else { return nil }
        var value: UInt64 = 0
        for k in 1..<textLength {
            let c = text[k]
            let digit: UInt8
            switch c {
            case 0x30...0x39: digit = c &- 0x30
            case 0x61...0x66: digit = c &- 0x57
            default: return nil
            }
            value = value << 4 | UInt64(digit)
        }
        return value
    }

    public static func parse(_ text: String, prefix: UInt8) -> UInt64? {
        var text = text
        return text.withUTF8 { parse($0, prefix: prefix) }
    }
}
