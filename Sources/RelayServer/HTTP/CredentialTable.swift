import RelayCore
import RelayCrypto

/// The relay's in-memory mirror of every token that can authenticate, keyed by SHA-256
/// digest, so the handshake path never touches the database. Loaded from a snapshot on every
/// store (re)connect and kept current by `wimz_credentials` notifications. Its size is the
/// number of active tokens (about 200 bytes each). Service thread only.
final class CredentialTable {
    private var byDigest: [[UInt8]: CredentialEntry] = [:]
    private var digestByID: [Int64: [UInt8]] = [:]
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

    /// Applies a changed token row (nil: gone).
    func update(id: Int64, entry: CredentialEntry?) {
        if let digest = digestByID.removeValue(forKey: id) { byDigest[digest] = nil }
        if let entry, entry.token.revokedAt == nil { insert(entry) }
    }

    func setDisabled(_ device: DeviceID, _ disabled: Bool) {
        if disabled { disabledDevices.insert(device) } else { disabledDevices.remove(device) }
    }

    /// The entry for a presented token, with its device's current state.
    func lookup(token: String) -> CredentialEntry? {
        guard var entry = byDigest[BearerToken.digest(token)] else { return nil }
        entry.deviceDisabled = disabledDevices.contains(entry.token.deviceID)
        return entry
    }

    private func insert(_ entry: CredentialEntry) {
        byDigest[entry.token.digest] = entry
        digestByID[entry.token.id] = entry.token.digest
        if entry.deviceDisabled { disabledDevices.insert(entry.token.deviceID) }
    }
}

/// Limits authentication failures per client address (PROTOCOL.md: 429 for too many auth
/// failures from one address). A bucket of `burst` failures refilled at `rate` per second.
final class AuthFailureLimiter {
    private var buckets: [String: (bucket: TokenBucket, lastUsed: UInt64)] = [:]
    let rate: Double
    let burst: Double

    init(rate: Double = 1, burst: Double = 20) {
        self.rate = rate
        self.burst = burst
    }

    /// True while `address` may still try.
    func allows(_ address: String, now: UInt64) -> Bool {
        guard var entry = buckets[address] else { return true }
        // Peek: take a token and give it back (a success must not consume failures).
        let ok = entry.bucket.take(now: now)
        if ok { entry.bucket = TokenBucket(restoring: entry.bucket) }
        buckets[address] = entry
        return ok
    }

    func recordFailure(_ address: String, now: UInt64) {
        var entry = buckets[address] ?? (TokenBucket(rate: rate, burst: burst, now: now), now)
        _ = entry.bucket.take(now: now)
        entry.lastUsed = now
        buckets[address] = entry
    }

    /// Forgets addresses quiet for a minute (their buckets are full again).
    func sweep(now: UInt64) {
        buckets = buckets.filter { now - $0.value.lastUsed < 60_000_000_000 }
    }
}
