import COpenSSL

/// ECDSA P-256 with SHA-256 (JOSE "ES256"), for the APNs provider token: signs with a private
/// key read from a PEM file (Apple's `.p8` is a PKCS #8 PEM), and returns the JOSE form of the
/// signature — r and s, 32 bytes each — not OpenSSL's DER. Owns its `EVP_PKEY`.
public final class ES256Signer: @unchecked Sendable {
    private let key: OpaquePointer

    public enum KeyError: Error, CustomStringConvertible {
        case unreadable, notP256
        public var description: String {
            switch self {
            case .unreadable: "the key is not a PEM private key"
            case .notP256: "the key is not an EC P-256 key (APNs keys are)"
            }
        }
    }

    /// Reads a PEM private key (PKCS #8 or SEC 1); it must be on the P-256 curve.
    public init(pem: [UInt8]) throws {
        guard let bio = pem.withUnsafeBytes({ BIO_new_mem_buf($0.baseAddress, Int32($0.count)) }) else { throw KeyError.unreadable }
        defer { BIO_free(bio) }
        guard let key = PEM_read_bio_PrivateKey(bio, nil, nil, nil) else { throw KeyError.unreadable }
        var name = [CChar](repeating: 0, count: 64)
        var length = 0
        guard EVP_PKEY_get_base_id(key) == EVP_PKEY_EC,
              EVP_PKEY_get_utf8_string_param(key, OSSL_PKEY_PARAM_GROUP_NAME, &name, name.count, &length) == 1,
              String(cString: name) == "prime256v1"
        else {
            EVP_PKEY_free(key)
            throw KeyError.notP256
        }
        self.key = key
    }

    deinit { EVP_PKEY_free(key) }

    /// The 64-byte signature (r ‖ s) of `message`.
    public func sign(_ message: [UInt8]) throws -> [UInt8] {
        guard let context = EVP_MD_CTX_new() else { throw CryptoError.digestFailed("EVP_MD_CTX_new") }
        defer { EVP_MD_CTX_free(context) }
        guard EVP_DigestSignInit_ex(context, nil, "SHA256", nil, nil, key, nil) == 1 else {
            throw CryptoError.digestFailed("EVP_DigestSignInit")
        }
        var length = 0
        guard message.withUnsafeBufferPointer({ EVP_DigestSign(context, nil, &length, $0.baseAddress, $0.count) }) == 1 else {
            throw CryptoError.digestFailed("EVP_DigestSign")
        }
        var der = [UInt8](repeating: 0, count: length)
        guard message.withUnsafeBufferPointer({ m in
            der.withUnsafeMutableBufferPointer { EVP_DigestSign(context, $0.baseAddress, &length, m.baseAddress, m.count) }
        }) == 1 else { throw CryptoError.digestFailed("EVP_DigestSign") }
        return try Self.joseSignature(fromDER: Array(der[..<length]))
    }

    /// DER `SEQUENCE { r INTEGER, s INTEGER }` → r ‖ s, each left-padded to 32 bytes.
    static func joseSignature(fromDER der: [UInt8]) throws -> [UInt8] {
        let signature: OpaquePointer? = der.withUnsafeBufferPointer { buffer in
            var p: UnsafePointer<UInt8>? = buffer.baseAddress
            return d2i_ECDSA_SIG(nil, &p, buffer.count)
        }
        guard let signature else { throw CryptoError.digestFailed("d2i_ECDSA_SIG") }
        defer { ECDSA_SIG_free(signature) }
        var out = [UInt8](repeating: 0, count: 64)
        let ok = out.withUnsafeMutableBufferPointer { buffer -> Bool in
            BN_bn2binpad(ECDSA_SIG_get0_r(signature), buffer.baseAddress, 32) == 32
                && BN_bn2binpad(ECDSA_SIG_get0_s(signature), buffer.baseAddress! + 32, 32) == 32
        }
        guard ok else { throw CryptoError.digestFailed("BN_bn2binpad") }
        return out
    }
}
