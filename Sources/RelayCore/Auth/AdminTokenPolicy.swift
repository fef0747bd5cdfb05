/// What the relay accepts as its admin token (it guards every device and token): at least
/// 128 bits by a conservative estimate — the length times the bits one character of the
/// narrowest alphabet it is drawn from can carry (hex 4, base64 and the like 6) — and at least
/// 8 different characters, so a long run of one letter does not pass. A floor, not a proof of
/// randomness: generate it with `openssl rand -hex 32`.
public enum AdminTokenPolicy {
    public static let minimumBits = 128.0

    /// Nil when `token` is acceptable, else why not.
    public static func problem(with token: String) -> String? {
        let characters = Array(token.unicodeScalars)
        let hex = characters.allSatisfy { ("0"..."9").contains($0) || ("a"..."f").contains($0) || ("A"..."F").contains($0) }
        let bitsPerCharacter = hex ? 4.0 : 6.0
        let bits = Double(characters.count) * bitsPerCharacter
        if characters.contains(where: { $0.value < 0x21 || $0.value > 0x7E }) {
            return "the admin token must be printable ASCII without spaces"
        }
        if bits < minimumBits {
            return "the admin token is too weak (about \(Int(bits)) bits, at least \(Int(minimumBits)) needed: "
                + "32 hex digits or 22 base64 characters; e.g. openssl rand -hex 32)"
        }
        if Set(characters).count < 8 {
            return "the admin token is too weak (fewer than 8 different characters)"
        }
        return nil
    }
}
