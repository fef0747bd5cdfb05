/// Pairing codes (docs/protocol.md v1.1 "Pairing a phone"): short, single-use secrets a person reads off the
/// robot and types into the app. 10 characters from a 31-symbol alphabet without the look-alikes
/// 0/O and 1/I/L: 10 × log2(31) ≈ 49.5 bits, shown as `ABCDE-FGHJK`.
public enum PairingCode {
    /// Digits and capitals that cannot be mistaken for one another.
    public static let alphabet = Array("23456789ABCDEFGHJKMNPQRSTUVWXYZ".utf8)
    public static let length = 10

    /// A fresh code, `XXXXX-XXXXX`.
    public static func generate() throws -> String {
        var symbols: [UInt8] = []
        // Rejection sampling: bytes ≥ 248 (8 × 31) would bias the first symbols.
        while symbols.count < length {
            for byte in try Crypto.randomBytes(16) where byte < 248 && symbols.count < length {
                symbols.append(alphabet[Int(byte) % alphabet.count])
            }
        }
        return String(decoding: symbols[..<5], as: UTF8.self) + "-" + String(decoding: symbols[5...], as: UTF8.self)
    }

    /// What a person typed, as stored: upper case, without spaces and dashes; nil when it cannot
    /// be a code (wrong length or a symbol outside the alphabet).
    public static func normalize(_ typed: String) -> String? {
        let symbols = typed.uppercased().utf8.filter { $0 != UInt8(ascii: "-") && $0 != UInt8(ascii: " ") }
        guard symbols.count == length, symbols.allSatisfy(alphabet.contains) else { return nil }
        return String(decoding: symbols, as: UTF8.self)
    }

    /// The digest a code is stored and looked up under (never the code itself).
    public static func digest(_ normalized: String) -> [UInt8] { Crypto.sha256("wimz-pairing:" + normalized) }
}
