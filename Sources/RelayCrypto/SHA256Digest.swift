import COpenSSL

/// A SHA-256 digest held inline as four words: a dictionary key with no array behind it (the
/// token mirror holds one per token and looks one up per handshake).
public struct SHA256Digest: Hashable, Sendable {
    private var words: (UInt64, UInt64, UInt64, UInt64) = (0, 0, 0, 0)

    /// The digest of `bytes`' 32 bytes; nil for any other length.
    public init?(_ bytes: [UInt8]) {
        guard bytes.count == 32 else { return nil }
        withUnsafeMutableBytes(of: &words) { $0.copyBytes(from: bytes) }
    }

    /// SHA-256 of `text`'s UTF-8 bytes, computed straight into the words.
    public init(of text: String) {
        var text = text
        let ok = text.withUTF8 { input in
            withUnsafeMutableBytes(of: &words) { out in
                EVP_Digest(input.baseAddress, input.count, out.baseAddress, nil, Crypto.sha256Algorithm, nil)
            }
        }
        // EVP_Digest with SHA-256 can only fail on allocation failure.
        precondition(ok == 1, "EVP_Digest(SHA-256) failed")
    }

    public var bytes: [UInt8] { withUnsafeBytes(of: words) { Array($0) } }

    public static func == (a: SHA256Digest, b: SHA256Digest) -> Bool {
        a.words.0 == b.words.0 && a.words.1 == b.words.1 && a.words.2 == b.words.2 && a.words.3 == b.words.3
    }

    /// One word is enough: a digest's bits are uniform, and `Hasher`'s per-process seed keeps
    /// anyone from aiming presented tokens at one bucket; equality still compares all four.
    public func hash(into hasher: inout Hasher) { hasher.combine(words.0) }
}
