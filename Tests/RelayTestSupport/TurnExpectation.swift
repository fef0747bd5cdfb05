import RelayCore
import RelayCrypto

/// What a TURN credential must be (coturn's TURN REST format): the tests' one copy of the rule.
public enum TurnExpectation {
    /// The password of `username` under `secret`: base64 of HMAC-SHA1.
    public static func credential(secret: String, username: String) -> String {
        Base64.encode(Crypto.hmacSHA1(key: Array(secret.utf8), message: Array(username.utf8)))
    }
}
