import COpenSSL

/// Errors from OpenSSL, turned into Swift values at the boundary.
public enum CryptoError: Error, CustomStringConvertible {
    case randomUnavailable
    case digestFailed(String)

    public var description: String {
        switch self {
        case .randomUnavailable: return "OpenSSL RAND_bytes failed: no secure randomness available"
        case .digestFailed(let what): return "OpenSSL \(what) failed"
        }
    }
}

/// Digests, MACs, randomness and comparison through OpenSSL's libcrypto.
/// Stateless and thread-safe: every call uses one-shot OpenSSL functions.
public enum Crypto {
    /// `count` bytes from OpenSSL's CSPRNG.
    public static func randomBytes(_ count: Int) throws -> [UInt8] {
        var out = [UInt8](repeating: 0, count: count)
        let ok = out.withUnsafeMutableBytes { buf in
            RAND_bytes(buf.baseAddress!.assumingMemoryBound(to: UInt8.self), Int32(count))
        }
        guard ok == 1 else { throw CryptoError.randomUnavailable }
        return out
    }

    /// SHA-256 of `data` (32 bytes).
    public static func sha256<Bytes: Collection>(_ data: Bytes) -> [UInt8] where Bytes.Element == UInt8 {
        var md = [UInt8](repeating: 0, count: Int(EVP_MAX_MD_SIZE))
        var length: UInt32 = 0
        let ok = withContiguousBytes(data) { input in
            md.withUnsafeMutableBufferPointer { out in
                EVP_Digest(input.baseAddress, input.count, out.baseAddress, &length, EVP_sha256(), nil)
            }
        }
        // EVP_Digest with SHA-256 can only fail on allocation failure.
        precondition(ok == 1, "EVP_Digest(SHA-256) failed")
        return Array(md.prefix(Int(length)))
    }

    /// SHA-256 of a string's UTF-8 bytes.
    public static func sha256(_ text: String) -> [UInt8] { sha256(Array(text.utf8)) }

    /// HMAC-SHA1 (RFC 2104) keyed with `key`'s raw bytes: the TURN REST credential MAC.
    public static func hmacSHA1(key: [UInt8], message: [UInt8]) -> [UInt8] {
        var md = [UInt8](repeating: 0, count: Int(EVP_MAX_MD_SIZE))
        var length: UInt32 = 0
        // OpenSSL wants non-null pointers even for empty inputs; lengths stay the real ones.
        let keyBytes = key.isEmpty ? [0] : key
        let messageBytes = message.isEmpty ? [0] : message
        keyBytes.withUnsafeBufferPointer { k in
            messageBytes.withUnsafeBufferPointer { m in
                md.withUnsafeMutableBufferPointer { out in
                    _ = HMAC(EVP_sha1(), k.baseAddress, Int32(key.count), m.baseAddress, message.count,
                             out.baseAddress, &length)
                }
            }
        }
        precondition(length == 20, "HMAC-SHA1 failed")
        return Array(md.prefix(Int(length)))
    }

    /// Compares in time that depends only on the length, never on where bytes differ.
    public static func constantTimeEquals(_ a: [UInt8], _ b: [UInt8]) -> Bool {
        guard a.count == b.count else { return false }
        if a.isEmpty { return true }
        return a.withUnsafeBytes { x in
            b.withUnsafeBytes { y in CRYPTO_memcmp(x.baseAddress, y.baseAddress, a.count) == 0 }
        }
    }

    private static func withContiguousBytes<Bytes: Collection, R>(
        _ data: Bytes, _ body: (UnsafeBufferPointer<UInt8>) -> R
    ) -> R where Bytes.Element == UInt8 {
        if let r = data.withContiguousStorageIfAvailable({ body($0) }) { return r }
        return Array(data).withUnsafeBufferPointer(body)
    }
}

extension Crypto {
    /// A random (version 4) UUID in its canonical text form.
    public static func uuidV4() throws -> String {
        var b = try randomBytes(16)
        b[6] = (b[6] & 0x0F) | 0x40
        b[8] = (b[8] & 0x3F) | 0x80
        let h = Hex.encode(b)
        let c = Array(h)
        return String(c[0..<8]) + "-" + String(c[8..<12]) + "-" + String(c[12..<16]) + "-" + String(c[16..<20]) + "-"
            + String(c[20..<32])
    }
}
