/// A UUID as its 128 bits. Audit event ids are these: an event is made on the service thread at
/// every connect and close, and the audit writer binds the 16 bytes to PostgreSQL's `uuid` as
/// they are, so the text form (8-4-4-4-12 lower-case hex digits, RFC 9562) is made only where an
/// id is written out — the spool, the admin API, a TURN issuance's row, a node's incarnation.
public struct UUIDValue: Sendable, Hashable, CustomStringConvertible {
    /// Bytes 0–7 and 8–15 of the UUID, each read most significant byte first.
    public let high: UInt64
    public let low: UInt64

    public init(high: UInt64, low: UInt64) {
        self.high = high
        self.low = low
    }

    /// Parses the text form (hex digits in either case, hyphens where the form has them);
    /// nil for anything else.
    public init?(_ text: String) {
        var text = text
        guard let (high, low) = text.withUTF8(UUIDValue.parse) else { return nil }
        self.init(high: high, low: low)
    }

    private static func parse(_ utf8: UnsafeBufferPointer<UInt8>) -> (UInt64, UInt64)? {
        guard utf8.count == 36 else { return nil }
        var halves: (UInt64, UInt64) = (0, 0)
        var digits = 0
        for (i, c) in utf8.enumerated() {
            if i == 8 || i == 13 || i == 18 || i == 23 {
                guard c == UInt8(ascii: "-") else { return nil }
                continue
            }
            guard let value = Hex.value(ofDigit: c) else { return nil }
            if digits < 16 {
                halves.0 = halves.0 << 4 | UInt64(value)
            } else {
                halves.1 = halves.1 << 4 | UInt64(value)
            }
            digits += 1
        }
        return halves
    }

    /// The 16 bytes in order (the binary form of PostgreSQL's `uuid`).
    public func append(to out: inout [UInt8]) {
        withUnsafeBytes(of: (high.bigEndian, low.bigEndian)) { out.append(contentsOf: $0) }
    }

    /// `8-4-4-4-12` lower-case hex digits.
    public var description: String {
        String(unsafeUninitializedCapacity: 36) { text in
            let digits: StaticString = "0123456789abcdef"
            var o = 0
            // Digit `d` (0–31) of the 32, hyphens before digits 8, 12, 16 and 20.
            for d in 0..<32 {
                if d == 8 || d == 12 || d == 16 || d == 20 {
                    text[o] = UInt8(ascii: "-")
                    o += 1
                }
                let half = d < 16 ? high : low
                text[o] = digits.utf8Start[Int(half >> UInt64(60 - 4 * (d % 16)) & 0x0F)]
                o += 1
            }
            return o
        }
    }
}
