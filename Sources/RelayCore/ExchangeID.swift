/// Ids the relay puts on the robot leg for exchanges it must match an answer to: rewritten
/// command ids (`"c…"`) and HTTP exchanges (`"h…"`). PROTOCOL.md v1.2: not guessable from
/// outside — 64 random bits, written as 16 lower-case hex digits after the prefix — so nobody
/// but the robot that received one can answer it.
public enum ExchangeID {
    /// A fresh random id (the system's CSPRNG).
    public static func random() -> UInt64 {
        var generator = SystemRandomNumberGenerator()
        return generator.next()
    }

    /// `prefix` and `id` as the id's text: `c00ab…` (always 17 characters).
    public static func text(_ prefix: Character, _ id: UInt64) -> String {
        let hex = String(id, radix: 16)
        return String(prefix) + String(repeating: "0", count: 16 - hex.count) + hex
    }

    /// The id in `text` (`prefix` and 16 hex digits), nil for anything else.
    public static func parse(_ text: some Collection<UInt8>, prefix: Character) -> UInt64? {
        guard text.count == 17, let first = text.first, first == prefix.asciiValue else { return nil }
        var value: UInt64 = 0
        for c in text.dropFirst() {
            let digit: UInt8
            switch c {
            case 0x30...0x39: digit = c - 0x30
            case 0x61...0x66: digit = c - 0x61 + 10
            default: return nil
            }
            value = value << 4 | UInt64(digit)
        }
        return value
    }
}
