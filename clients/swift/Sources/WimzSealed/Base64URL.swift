import Foundation

/// The contract's B64: base64url without padding (RFC 4648 section 5).
public enum Base64URL {
    public static func encode<Bytes: DataProtocol>(_ bytes: Bytes) -> String {
        Data(bytes).base64EncodedString()
            .replacingOccurrences(of: "+", with: "-")
            .replacingOccurrences(of: "/", with: "_")
            .replacingOccurrences(of: "=", with: "")
    }

    /// The bytes of a B64 text, or nil when it is not one (padding and the standard alphabet are
    /// refused: one text, one encoding).
    public static func decode(_ text: String) -> Data? {
        guard !text.contains(where: { $0 == "=" || $0 == "+" || $0 == "/" }) else { return nil }
        let standard = text.replacingOccurrences(of: "-", with: "+").replacingOccurrences(of: "_", with: "/")
        return Data(base64Encoded: standard + String(repeating: "=", count: (4 - standard.count % 4) % 4))
    }
}
