import COpenSSL
import RelayCore
import Synchronization

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

    // Fetched once: OpenSSL 3's `EVP_sha256()` / one-shot `HMAC()` look the algorithm up in
    // the provider tables on every call, which showed up in the profile of every handshake
    // and TURN request. Fetched algorithm objects are immutable and safe to share.
    nonisolated(unsafe) static let sha256Algorithm = EVP_MD_fetch(nil, "SHA256", nil)
    nonisolated(unsafe) static let hmacAlgorithm = EVP_MAC_fetch(nil, "HMAC", nil)

    /// SHA-256 of `data` (32 bytes).
    public static func sha256<Bytes: Collection>(_ data: Bytes) -> [UInt8] where Bytes.Element == UInt8 {
        var md = [UInt8](repeating: 0, count: Int(EVP_MAX_MD_SIZE))
        var length: UInt32 = 0
        let ok = withContiguousBytes(data) { input in
            md.withUnsafeMutableBufferPointer { out in
                EVP_Digest(input.baseAddress, input.count, out.baseAddress, &length, sha256Algorithm, nil)
            }
        }
        // EVP_Digest with SHA-256 can only fail on allocation failure.
        precondition(ok == 1, "EVP_Digest(SHA-256) failed")
        return Array(md.prefix(Int(length)))
    }

    /// SHA-256 of a string's UTF-8 bytes, hashed where they are into the one array returned
    /// (a bearer token is digested on every handshake).
    public static func sha256(_ text: String) -> [UInt8] {
        var text = text
        return text.withUTF8 { input in
            [UInt8](unsafeUninitializedCapacity: 32) { out, count in
                let ok = EVP_Digest(input.baseAddress, input.count, out.baseAddress, nil, sha256Algorithm, nil)
                // EVP_Digest with SHA-256 can only fail on allocation failure.
                precondition(ok == 1, "EVP_Digest(SHA-256) failed")
                count = 32
            }
        }
    }

    /// HMAC-SHA1 (RFC 2104) keyed with `key`'s raw bytes: the TURN REST credential MAC.
    /// For many MACs under one key, `HMACSHA1Key` avoids re-keying.
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
    /// A random (version 4) UUID in its canonical text form (node incarnations).
    public static func uuidV4() throws -> String {
        let (random0, random1) = try IdentifierRandomness.shared.take16()
        return UUIDValue(high: random0 & ~0xF000 | 0x4000, low: variant(random1)).description
    }

    /// A time-ordered (version 7, RFC 9562) UUID: the first 48 bits are `unixMilliseconds`, the
    /// other 74 free bits random. Audit event ids: ids of later events sort later, so the unique
    /// index on them grows at its right edge instead of touching (and, after each checkpoint,
    /// logging a full image of) a random page per row.
    public static func uuidV7(unixMilliseconds: UInt64) throws -> UUIDValue {
        let (random0, random1) = try IdentifierRandomness.shared.take16()
        return UUIDValue(high: unixMilliseconds << 16 | 0x7000 | random0 & 0x0FFF, low: variant(random1))
    }

    /// RFC 9562's variant (`10` in the top bits of byte 8) over random bits.
    private static func variant(_ random: UInt64) -> UInt64 {
        random & 0x3FFF_FFFF_FFFF_FFFF | 0x8000_0000_0000_0000
    }
}

/// An HMAC-SHA1 key kept in an OpenSSL MAC context, re-initialised (not re-fetched, not
/// re-keyed) per message: the TURN service signs every credential with the same secret.
/// Not thread-safe; one owner, which frees the context.
public final class HMACSHA1Key {
    private let context: OpaquePointer

    public init(_ key: [UInt8]) {
        guard let algorithm = Crypto.hmacAlgorithm, let context = EVP_MAC_CTX_new(algorithm) else {
            preconditionFailure("OpenSSL has no HMAC implementation")
        }
        self.context = context
        let keyBytes = key.isEmpty ? [0] : key
        let ok = OSSL_MAC_PARAM_DIGEST.withCString { name in
            "SHA1".withCString { digest in
                var params = [OSSL_PARAM_construct_utf8_string(name, UnsafeMutablePointer(mutating: digest), 0),
                              OSSL_PARAM_construct_end()]
                return keyBytes.withUnsafeBufferPointer { k in EVP_MAC_init(context, k.baseAddress, key.count, &params) }
            }
        }
        precondition(ok == 1, "EVP_MAC_init(HMAC-SHA1) failed")
    }

    deinit { EVP_MAC_CTX_free(context) }

    /// HMAC-SHA1 of `message` (20 bytes).
    public func mac(_ message: [UInt8]) -> [UInt8] {
        var out = [UInt8](repeating: 0, count: 20)
        var length = 0
        let ok = message.withUnsafeBufferPointer { m in
            out.withUnsafeMutableBufferPointer { o in
                // A NULL key re-initialises with the key already set.
                EVP_MAC_init(context, nil, 0, nil) == 1
                    && EVP_MAC_update(context, m.baseAddress ?? UnsafePointer(o.baseAddress!), m.count) == 1
                    && EVP_MAC_final(context, o.baseAddress, &length, 20) == 1
            }
        }
        precondition(ok && length == 20, "HMAC-SHA1 failed")
        return out
    }
}

/// Random bytes for identifiers, drawn from OpenSSL's CSPRNG 4 KiB at a time: one `RAND_bytes`
/// call costs ~6,600 instructions of OpenSSL's own however few bytes it returns, and every
/// WebSocket connection makes two audit rows, each with a UUID (docs/performance.md, session 12).
/// Only identifiers come from here; secrets (tokens, TURN secrets, pairing codes) call
/// `randomBytes` themselves, so none ever sits in this buffer.
final class IdentifierRandomness: Sendable {
    static let shared = IdentifierRandomness()
    /// The drawn bytes and how many are used (audit rows are made on the service thread and on workers).
    private let state = Mutex((buffer: [UInt8](repeating: 0, count: 4096), used: 4096))

    /// The next 16 bytes (as two words: no array per identifier).
    func take16() throws -> (UInt64, UInt64) {
        try state.withLock { state throws -> (UInt64, UInt64) in
            if state.used + 16 > state.buffer.count {
                let ok = state.buffer.withUnsafeMutableBytes {
                    RAND_bytes($0.baseAddress!.assumingMemoryBound(to: UInt8.self), Int32($0.count))
                }
                guard ok == 1 else { throw CryptoError.randomUnavailable }
                state.used = 0
            }
            defer { state.used += 16 }
            return state.buffer.withUnsafeBytes {
                ($0.loadUnaligned(fromByteOffset: state.used, as: UInt64.self),
                 $0.loadUnaligned(fromByteOffset: state.used + 8, as: UInt64.self))
            }
        }
    }
}
