/// A token digest as a key (the token cache, the lookups waiting, the queue to the store):
/// SHA-256's 32 bytes inline (no allocation a token), hashed by their first word rather than byte
/// by byte — an `[UInt8]` key feeds `Hasher` one byte at a time (~32 calls a hash). SHA-256's
/// output is uniform, and `Hasher`'s per-process seed keeps presented tokens from being aimed at
/// one bucket. Equality compares all 32 bytes.
public struct DigestKey: Hashable, Sendable {
    let words: (UInt64, UInt64, UInt64, UInt64)

    /// `bytes` must be 32 long (only SHA-256 digests are made keys; anything else is all zeros).
    public init(_ bytes: [UInt8]) {
        var words: (UInt64, UInt64, UInt64, UInt64) = (0, 0, 0, 0)
        bytes.withUnsafeBytes { raw in
            guard raw.count == 32 else { return }
            words = (raw.loadUnaligned(fromByteOffset: 0, as: UInt64.self), raw.loadUnaligned(fromByteOffset: 8, as: UInt64.self),
                     raw.loadUnaligned(fromByteOffset: 16, as: UInt64.self), raw.loadUnaligned(fromByteOffset: 24, as: UInt64.self))
        }
        self.words = words
    }

    /// The key of a SHA-256 digest; nil for bytes of any other length.
    public init?(exactly bytes: [UInt8]) {
        guard bytes.count == 32 else { return nil }
        self.init(bytes)
    }

    /// The digest's bytes again.
    public var bytes: [UInt8] {
        withUnsafeBytes(of: words) { Array($0) }
    }

    public static func == (a: DigestKey, b: DigestKey) -> Bool {
        a.words.0 == b.words.0 && a.words.1 == b.words.1 && a.words.2 == b.words.2 && a.words.3 == b.words.3
    }

    public func hash(into hasher: inout Hasher) { hasher.combine(words.0) }
}
