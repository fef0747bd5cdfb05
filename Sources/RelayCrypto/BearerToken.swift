import RelayCore
/// Bearer tokens: `wimz_r_` (robot) or `wimz_a_` (app) followed by 43 base64url
/// characters carrying 256 random bits. Only the SHA-256 digest is ever stored.
public enum BearerToken {
    /// Random bytes per token: 256 bits.
    public static let entropyBytes = 32

    /// A fresh token with the given prefix (e.g. `wimz_r_`).
    public static func generate(prefix: String) throws -> String {
        prefix + Base64.encodeURLSafe(try Crypto.randomBytes(entropyBytes))
    }

    /// The digest under which a token is stored and looked up.
    public static func digest(_ token: String) -> [UInt8] { Crypto.sha256(token) }
}
