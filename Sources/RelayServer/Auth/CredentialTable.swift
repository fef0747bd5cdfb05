import RelayCore
import RelayCrypto

/// The relay's in-memory mirror of every token that can authenticate, keyed by SHA-256
/// digest, so the handshake path never touches the database. Loaded from a snapshot on every
/// store (re)connect and kept current by `wimz_credentials` notifications. Its size is the
/// number of active tokens: 700–1,100 bytes of RSS each, measured (`scripts/bench-mirror.sh`,
/// docs/performance.md). Service thread only.
final class CredentialTable {
    private var byDigest: [DigestKey: CredentialEntry] = [:]
    private var digestByID: [Int64: DigestKey] = [:]
    private var disabledDevices: Set<DeviceID> = []
    /// False until the first snapshot: then a miss means "unknown"; before it, "store unavailable".
    private(set) var isLoaded = false

    var count: Int { byDigest.count }

    func load(_ entries: [CredentialEntry]) {
        byDigest.removeAll(keepingCapacity: true)
        digestByID.removeAll(keepingCapacity: true)
        disabledDevices.removeAll()
        for entry in entries { insert(entry) }
        isLoaded = true
    }

    /// Applies a changed token row (nil: gone); returns what the mirror held for it before.
    @discardableResult
    func update(id: Int64, entry: CredentialEntry?) -> CredentialEntry? {
        var previous: CredentialEntry?
        if let digest = digestByID.removeValue(forKey: id) { previous = byDigest.removeValue(forKey: digest) }
        if let entry, entry.token.revokedAt == nil { insert(entry) }
        return previous
    }

    func setDisabled(_ device: DeviceID, _ disabled: Bool) {
        if disabled { disabledDevices.insert(device) } else { disabledDevices.remove(device) }
    }

    /// The entry of token `id`, with its device's current state.
    func entry(id: Int64) -> CredentialEntry? {
        guard let digest = digestByID[id], var entry = byDigest[digest] else { return nil }
        entry.deviceDisabled = disabledDevices.contains(entry.token.deviceID)
        return entry
    }

    /// The entry for a presented token, with its device's current state.
    func lookup(token: String) -> CredentialEntry? {
        guard var entry = byDigest[DigestKey(BearerToken.digest(token))] else { return nil }
        entry.deviceDisabled = disabledDevices.contains(entry.token.deviceID)
        return entry
    }

    private func insert(_ entry: CredentialEntry) {
        // Stored digests are SHA-256's 32 bytes (the store's column); any other is no token's.
        guard entry.token.digest.count == 32 else { return }
        let key = DigestKey(entry.token.digest)  // the record's own bytes: no second copy
        byDigest[key] = entry
        digestByID[entry.token.id] = key
        if entry.deviceDisabled { disabledDevices.insert(entry.token.deviceID) }
    }
}

/// A token digest as the mirror's key, hashed by its first eight bytes rather than all 32 one at
/// a time (an array's own hashing, ~1,300 instructions a handshake): SHA-256's output is uniform,
/// and `Hasher`'s per-process seed keeps presented tokens from being aimed at one bucket.
/// Equality still compares every byte.
private struct DigestKey: Hashable {
    let bytes: [UInt8]

    init(_ bytes: [UInt8]) { self.bytes = bytes }

    func hash(into hasher: inout Hasher) {
        var word: UInt64 = 0
        bytes.withUnsafeBytes { raw in
            if raw.count >= 8 { word = raw.loadUnaligned(as: UInt64.self) }
        }
        hasher.combine(word)
    }
}

/// Limits authentication failures per client address (docs/protocol.md: 429 for too many auth
/// failures from one address): `burst` failures, refilled at `rate` per second, counted per
/// `AddressKey` (IPv6 per /64). Only failing attempts are slowed: the server checks a presented
/// credential first and asks `isBlocked` only when it failed, so a valid token still connects
/// from an address where someone else keeps failing (one carrier NAT, many phones).
final class AuthFailureLimiter {
    private var failures: KeyedRateLimiter<String>

    init(rate: Double = 1, burst: Double = 20, capacity: Int = 10_000) {
        failures = KeyedRateLimiter(rate: rate, burst: burst, capacity: capacity)
    }

    /// True once `address` has used up its failures: its next failure is answered 429.
    func isBlocked(_ address: String, now: UInt64) -> Bool {
        !failures.wouldAllow(AddressKey.of(address), now: now)
    }

    func recordFailure(_ address: String, now: UInt64) {
        _ = failures.allow(AddressKey.of(address), now: now)
    }

    /// Forgets addresses whose failures have refilled.
    func sweep(now: UInt64) { failures.sweep(now: now) }
}
