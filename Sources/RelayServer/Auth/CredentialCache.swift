import RelayCore
import RelayCrypto

/// The tokens this relay has met, keyed by SHA-256 digest: those its clients presented (read
/// from the store in batches, `CredentialLookups`) and kept current by `wimz_credentials`
/// notifications, at most `capacity` of them, the least recently used forgotten first. Digests
/// the store knows no token for are remembered apart (at most `unknownCapacity`, so a flood of
/// made-up tokens cannot push real ones out). Its size follows the clients this node serves, not
/// the fleet. Service thread only.
final class CredentialCache {
    /// What the cache says about a presented token.
    enum Lookup {
        case found(CredentialEntry)
        /// The store has no such token (or only a revoked one).
        case unknown
        /// Not read from the store yet: ask `CredentialLookups`.
        case notHeld
    }

    private var known: LRUTable<DigestKey, HeldToken>
    private var unknown: LRUTable<DigestKey, Bool>
    /// The key of every token in `known`, by id (what notifications name).
    private var digestByID: [Int64: DigestKey] = [:]

    init(capacity: Int, unknownCapacity: Int = 10_000) {
        known = LRUTable(capacity: capacity)
        unknown = LRUTable(capacity: unknownCapacity)
    }

    var count: Int { known.count }
    /// The ids of the tokens held (read again after the listener reconnects).
    var ids: [Int64] { Array(digestByID.keys) }

    /// What is known about a presented token (`token`'s digest), marked as just used.
    func lookup(token: String) -> Lookup { lookup(digest: BearerToken.digest(token)) }

    func lookup(digest: [UInt8]) -> Lookup {
        let key = DigestKey(digest)
        if let held = known.use(key) { return .found(held.entry(key)) }
        return unknown.peek(key) != nil ? .unknown : .notHeld
    }

    /// The token with `id`, when held (not marked as used).
    func entry(id: Int64) -> CredentialEntry? {
        digestByID[id].flatMap { key in known.peek(key)?.entry(key) }
    }

    /// A lookup's answer: the tokens found among `digests`; the others are no token's.
    func found(digests: [[UInt8]], entries: [CredentialEntry]) {
        for entry in entries { remember(entry) }
        let found = Set(entries.map(\.token.digest))
        for digest in digests where !found.contains(DigestKey(digest)) { unknown.set(DigestKey(digest), true) }
    }

    /// A token changed in the store (nil: deleted). Only what the cache holds, or has found
    /// unknown, is taken: a token nobody here presented stays in the store. Returns whether it
    /// was held (or is now).
    @discardableResult
    func changed(id: Int64, entry: CredentialEntry?) -> Bool {
        guard let entry else {
            guard let key = digestByID[id] else { return false }
            forget(id: id)
            unknown.set(key, true)  // deleted: no token now
            return true
        }
        guard digestByID[id] != nil || unknown.peek(entry.token.digest) != nil else { return false }
        remember(entry)
        return true
    }

    /// A device was disabled or enabled: the tokens held for it say so.
    func setDisabled(_ device: DeviceID, _ disabled: Bool) {
        var affected: [(DigestKey, HeldToken)] = []
        known.forEach { key, held in if held.device == device { affected.append((key, held)) } }
        for (key, held) in affected {
            var changed = held
            changed.deviceDisabled = disabled
            known.set(key, changed)
        }
    }

    /// The listener reconnected: what was found unknown may have been issued meanwhile.
    func forgetUnknown() { unknown = LRUTable(capacity: unknown.capacity) }

    /// Takes a token as the store has it: a revoked one is no token (as if deleted).
    func remember(_ entry: CredentialEntry) {
        let key = entry.token.digest
        guard entry.token.revokedAt == nil else {
            forget(id: entry.token.id)
            unknown.set(key, true)
            return
        }
        unknown.remove(key)
        if known.peek(key) == nil, known.count == known.capacity, let evicted = known.oldestValue {
            digestByID[evicted.id] = nil  // the table reuses its slot
        }
        known.set(key, HeldToken(entry))
        digestByID[entry.token.id] = key
    }

    private func forget(id: Int64) {
        if let key = digestByID.removeValue(forKey: id) { known.remove(key) }
    }
}

/// What the cache keeps of a token: what the checks read, and no more (no label, no digest — the
/// key is that — and of its times only the expiry): ~48 bytes inline, and no allocation for a
/// device id of 15 bytes or less. The bytes per socket a cold client adds are these and the key's.
private struct HeldToken {
    let id: Int64
    let device: DeviceID
    let role: Role
    let access: Access
    let control: Bool
    let expiresAt: UnixTime?
    var deviceDisabled: Bool

    init(_ entry: CredentialEntry) {
        id = entry.token.id
        device = entry.token.deviceID
        role = entry.token.role
        access = entry.token.access
        control = entry.token.control
        expiresAt = entry.token.expiresAt
        deviceDisabled = entry.deviceDisabled
    }

    /// As the checks take it, with its key (a held token is never revoked: a revoked one is forgotten).
    func entry(_ digest: DigestKey) -> CredentialEntry {
        CredentialEntry(token: TokenCredential(id: id, deviceID: device, role: role, digest: digest, expiresAt: expiresAt,
                                               revokedAt: nil, access: access, control: control),
                        deviceDisabled: deviceDisabled)
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
