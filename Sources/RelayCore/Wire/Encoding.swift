/// Base64 (RFC 4648 §4) and base64url (§5) and hex, as used on the wire and in the store.
public enum Base64 {
    private static let standard = Array("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/".utf8)
    private static let urlSafe = Array("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_".utf8)

    /// Standard alphabet with `=` padding (TURN credentials, coturn's format).
    public static func encode(_ bytes: [UInt8]) -> String { encode(bytes, alphabet: standard, pad: true) }

    /// URL-safe alphabet without padding (bearer tokens: safe in query strings).
    public static func encodeURLSafe(_ bytes: [UInt8]) -> String { encode(bytes, alphabet: urlSafe, pad: false) }

    /// Decodes standard Base64 strictly (RFC 4648 §4, like Python's `b64decode(validate=True)`
    /// and stricter): only the standard alphabet, a length that is a multiple of 4, `=` only as
    /// the last one or two characters, and no bits set past the data (one encoding per value).
    /// Nil for anything else: a body the relay forwards has one meaning at both ends.
    public static func decode(_ text: String) -> [UInt8]? {
        let chars = Array(text.utf8)
        guard chars.count % 4 == 0 else { return nil }
        let padding = chars.reversed().prefix { $0 == UInt8(ascii: "=") }.count
        guard padding <= 2 else { return nil }
        var out: [UInt8] = []
        out.reserveCapacity(chars.count / 4 * 3)
        var acc: UInt32 = 0
        var bits = 0
        for c in chars[..<(chars.count - padding)] {
            guard let v = value(c) else { return nil }
            acc = (acc << 6) | v
            bits += 6
            if bits >= 8 {
                bits -= 8
                out.append(UInt8((acc >> UInt32(bits)) & 0xFF))
            }
        }
        // Leftover bits must be zero and the padding must fill the last quantum exactly.
        guard acc & ((1 << UInt32(bits)) - 1) == 0, padding == (bits == 4 ? 2 : bits == 2 ? 1 : 0) else { return nil }
        return out
    }

    /// Decodes base64url without padding (RFC 4648 §5, the sealed household's B64) as strictly
    /// as `decode`: nil for padding, the standard alphabet's `+` and `/`, or stray bits.
    public static func decodeURLSafe(_ text: String) -> [UInt8]? {
        var standard = Array(text.utf8)
        for (i, c) in standard.enumerated() {
            switch c {
            case UInt8(ascii: "="), UInt8(ascii: "+"), UInt8(ascii: "/"): return nil
            case UInt8(ascii: "-"): standard[i] = UInt8(ascii: "+")
            case UInt8(ascii: "_"): standard[i] = UInt8(ascii: "/")
            default: break
            }
        }
        guard standard.count % 4 != 1 else { return nil }
        standard += Array(repeating: UInt8(ascii: "="), count: (4 - standard.count % 4) % 4)
        return decode(String(decoding: standard, as: UTF8.self))
    }

    private static func value(_ c: UInt8) -> UInt32? {
        switch c {
        case UInt8(ascii: "A")...UInt8(ascii: "Z"): UInt32(c - UInt8(ascii: "A"))
        case UInt8(ascii: "a")...UInt8(ascii: "z"): UInt32(c - UInt8(ascii: "a") + 26)
        case UInt8(ascii: "0")...UInt8(ascii: "9"): UInt32(c - UInt8(ascii: "0") + 52)
        case UInt8(ascii: "+"): 62
        case UInt8(ascii: "/"): 63
        default: nil
        }
    }

    private static func encode(_ bytes: [UInt8], alphabet: [UInt8], pad: Bool) -> String {
        var out: [UInt8] = []
        out.reserveCapacity((bytes.count + 2) / 3 * 4)
        var i = 0
        while i + 2 < bytes.count {
            let n = UInt32(bytes[i]) << 16 | UInt32(bytes[i + 1]) << 8 | UInt32(bytes[i + 2])
            out += [alphabet[Int(n >> 18 & 63)], alphabet[Int(n >> 12 & 63)], alphabet[Int(n >> 6 & 63)], alphabet[Int(n & 63)]]
            i += 3
        }
        let rest = bytes.count - i
        if rest > 0 {
            var n = UInt32(bytes[i]) << 16
            if rest == 2 { n |= UInt32(bytes[i + 1]) << 8 }
            out.append(alphabet[Int(n >> 18 & 63)])
            out.append(alphabet[Int(n >> 12 & 63)])
            if rest == 2 { out.append(alphabet[Int(n >> 6 & 63)]) }
            if pad { out += Array(repeating: UInt8(ascii: "="), count: 3 - rest) }
        }
        return String(decoding: out, as: UTF8.self)
    }
}

public enum Hex {
    private static let digits = Array("0123456789abcdef".utf8)

    /// Lower-case hex.
    public static func encode(_ bytes: [UInt8]) -> String {
        var out = [UInt8]()
        out.reserveCapacity(bytes.count * 2)
        for b in bytes {
            out.append(digits[Int(b >> 4)])
            out.append(digits[Int(b & 15)])
        }
        return String(decoding: out, as: UTF8.self)
    }

    /// The value of one hex digit of either case; nil for another character.
    @inlinable
    public static func value(ofDigit c: UInt8) -> UInt8? {
        switch c {
        case UInt8(ascii: "0")...UInt8(ascii: "9"): c - UInt8(ascii: "0")
        case UInt8(ascii: "a")...UInt8(ascii: "f"): c - UInt8(ascii: "a") + 10
        case UInt8(ascii: "A")...UInt8(ascii: "F"): c - UInt8(ascii: "A") + 10
        default: nil
        }
    }

    /// Decodes hex of either case; nil for odd length or another character.
    public static func decode(_ text: String) -> [UInt8]? {
        let chars = Array(text.utf8)
        guard chars.count % 2 == 0 else { return nil }
        var out = [UInt8]()
        out.reserveCapacity(chars.count / 2)
        var i = 0
        while i < chars.count {
            guard let hi = value(ofDigit: chars[i]), let lo = value(ofDigit: chars[i + 1]) else { return nil }
            out.append(hi << 4 | lo)
            i += 2
        }
        return out
    }
}
