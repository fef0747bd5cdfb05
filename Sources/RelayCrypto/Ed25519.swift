import COpenSSL

/// Ed25519 signature checks (RFC 8032) through OpenSSL: the one signature of the sealed household
/// the relay verifies itself — an owner's history grant (docs/protocol.md v1.6), before it hands
/// a member the epoch secrets inside. Everything else signed is the ends' to verify.
public enum Ed25519 {
    /// Whether `signature` (64 bytes) is `publicKey`'s (32 bytes) over `message`.
    public static func verifies(signature: [UInt8], of message: [UInt8], publicKey: [UInt8]) -> Bool {
        guard publicKey.count == 32, signature.count == 64,
              let key = publicKey.withUnsafeBufferPointer({ EVP_PKEY_new_raw_public_key(EVP_PKEY_ED25519, nil, $0.baseAddress, 32) })
        else { return false }
        defer { EVP_PKEY_free(key) }
        guard let context = EVP_MD_CTX_new() else { return false }
        defer { EVP_MD_CTX_free(context) }
        guard EVP_DigestVerifyInit(context, nil, nil, nil, key) == 1 else { return false }
        return signature.withUnsafeBufferPointer { s in
            message.withUnsafeBufferPointer { m in EVP_DigestVerify(context, s.baseAddress, 64, m.baseAddress, m.count) }
        } == 1
    }
}
