import Testing
import RelayCore
import RelayCrypto
import RelayWorkers
@testable import RelayServer

/// The tokens a node holds: what its clients presented, bounded, kept current by the store's
/// changes; and the waits for the ones it does not hold yet.
@Suite struct CredentialCacheTests {
    private func entry(_ id: Int64, device: String = "d1", secret: String? = nil) -> CredentialEntry {
        let token = TokenCredential(id: id, deviceID: DeviceID(device)!, role: .app, digest: DigestKey(BearerToken.digest(secret ?? "wimz_a_\(id)")),
                                    expiresAt: nil, revokedAt: nil, access: .owner, control: false)
        return CredentialEntry(token: token, deviceDisabled: false)
    }

    private func held(_ cache: CredentialCache, _ secret: String) -> Int64? {
        if case .found(let entry) = cache.lookup(token: secret) { return entry.token.id }
        return nil
    }

    @Test func holdsWhatTheStoreFoundAndRemembersWhatItDidNot() {
        let cache = CredentialCache(capacity: 1000)
        #expect({ if case .notHeld = cache.lookup(token: "wimz_a_1") { true } else { false } }())
        cache.found(digests: [BearerToken.digest("wimz_a_1"), BearerToken.digest("wimz_a_nobody")], entries: [entry(1)])
        #expect(held(cache, "wimz_a_1") == 1)
        #expect({ if case .unknown = cache.lookup(token: "wimz_a_nobody") { true } else { false } }())
        // A token issued later with a digest found unknown is taken; one nobody presented is not.
        #expect(cache.changed(id: 2, entry: entry(2, secret: "wimz_a_nobody")))
        #expect(held(cache, "wimz_a_nobody") == 2)
        #expect(!cache.changed(id: 3, entry: entry(3)))
        #expect({ if case .notHeld = cache.lookup(token: "wimz_a_3") { true } else { false } }())
        // Revoked or deleted: no token from then on, without asking the store again.
        var revoked = entry(1)
        revoked.token.revokedAt = UnixTime(microseconds: 1)
        cache.changed(id: 1, entry: revoked)
        #expect({ if case .unknown = cache.lookup(token: "wimz_a_1") { true } else { false } }())
        cache.changed(id: 2, entry: nil)
        #expect({ if case .unknown = cache.lookup(token: "wimz_a_nobody") { true } else { false } }())
        // After a reconnect, what was unknown is asked again.
        cache.forgetUnknown()
        #expect({ if case .notHeld = cache.lookup(token: "wimz_a_1") { true } else { false } }())
    }

    @Test func isBoundedForgettingTheLeastRecentlyUsedAndItsID() {
        let cache = CredentialCache(capacity: 1000)
        cache.found(digests: [], entries: (1...1000).map { entry($0) })
        #expect(held(cache, "wimz_a_1") == 1)  // used: the newest now
        cache.found(digests: [], entries: [entry(1001)])
        #expect(cache.count == 1000)
        #expect(held(cache, "wimz_a_1") == 1 && held(cache, "wimz_a_1001") == 1001)
        #expect({ if case .notHeld = cache.lookup(token: "wimz_a_2") { true } else { false } }())
        #expect(cache.entry(id: 2) == nil && !cache.ids.contains(2) && cache.ids.count == 1000)
    }

    /// A listed token becomes what its checks read — its digest as the cache's key, no label or
    /// times of use; a digest that is not SHA-256's 32 bytes is no token's.
    @Test func aStoredTokenBecomesWhatItsChecksRead() {
        let digest = BearerToken.digest("wimz_a_1"), until = UnixTime(seconds: 2_000_000_000)
        var record = TokenRecord(id: 7, deviceID: DeviceID("d1")!, role: .app, label: "Ana's phone", digest: digest,
                                 createdAt: UnixTime(seconds: 1), expiresAt: until, revokedAt: nil, lastUsedAt: UnixTime(seconds: 2),
                                 access: .guest, control: true)
        #expect(record.credential == TokenCredential(id: 7, deviceID: DeviceID("d1")!, role: .app, digest: DigestKey(digest),
                                                     expiresAt: until, revokedAt: nil, access: .guest, control: true))
        #expect(record.credential?.memberFields.map(\.0) == ["token_id", "access", "control", "until"])
        record.digest = Array(digest.prefix(16))
        #expect(record.credential == nil)
    }

    @Test func aDisabledDeviceIsSeenInEveryTokenHeldForIt() {
        let cache = CredentialCache(capacity: 1000)
        cache.found(digests: [], entries: [entry(1), entry(2), entry(3, device: "d2")])
        cache.setDisabled(DeviceID("d1")!, true)
        #expect(cache.entry(id: 1)?.deviceDisabled == true && cache.entry(id: 2)?.deviceDisabled == true)
        #expect(cache.entry(id: 3)?.deviceDisabled == false)
    }

    @Test func waitsForOneLookupPerTokenAndEndAtTheHold() {
        let clock = ManualClock()
        let lookups = CredentialLookups(queue: CredentialQueue(), clock: clock.clock, holdSeconds: 2)
        var resumed: [String] = []
        let digest = BearerToken.digest("wimz_a_1")
        #expect(lookups.wait(for: digest) { resumed.append("first") } == .waiting)
        #expect(lookups.wait(for: digest) { resumed.append("second") } == .waiting)
        #expect(lookups.wait(for: BearerToken.digest("wimz_a_2")) { resumed.append("other") } == .waiting)
        #expect(lookups.asked == 2 && lookups.tokensBeingRead == 2 && lookups.waitingRequests == 3)
        lookups.answered([digest])
        #expect(resumed == ["first", "second"])
        clock.advance(seconds: 2.5)
        lookups.expire(now: clock.monotonic)
        #expect(resumed == ["first", "second", "other"] && lookups.timedOut == 1 && lookups.tokensBeingRead == 0
                && lookups.waitingRequests == 0)
    }

    /// At most `capacity` requests wait, and the monitor's queue is bounded too: past either a
    /// request is not made to wait (its caller answers 503), counted; failing addresses share a
    /// few of those places (past them: 429); room comes back as waits end.
    @Test func waitsAreBounded() {
        let clock = ManualClock()
        let lookups = CredentialLookups(queue: CredentialQueue(capacity: 2), clock: clock.clock, holdSeconds: 2, capacity: 3,
                                        failingShare: 1)
        var resumed = 0
        let (a, b, c) = (BearerToken.digest("wimz_a_1"), BearerToken.digest("wimz_a_2"), BearerToken.digest("wimz_a_3"))
        #expect(lookups.wait(for: a) { resumed += 1 } == .waiting)
        #expect(lookups.wait(for: b, failingAddress: true) { resumed += 1 } == .waiting)
        #expect(lookups.wait(for: a, failingAddress: true) { resumed += 1 } == .failingShareFull)  // the share is taken
        #expect(lookups.wait(for: c) { resumed += 1 } == .full)  // the queue to the monitor is full
        #expect(lookups.wait(for: a) { resumed += 1 } == .waiting)  // the same lookup: no new digest queued
        #expect(lookups.wait(for: a) { resumed += 1 } == .full)  // three wait already
        #expect(lookups.refusedFull == 2 && lookups.refusedFailingAddress == 1 && lookups.asked == 2)
        // The gauge's unit is the bound's: requests, not the tokens they wait for.
        #expect(lookups.waitingRequests == 3 && lookups.failingWaiters == 1 && lookups.tokensBeingRead == 2)
        lookups.answered([b])
        #expect(resumed == 1)
        #expect(lookups.wait(for: b, failingAddress: true) { resumed += 1 } == .waiting)  // its place is free again
        lookups.answered([a, b])
        #expect(resumed == 4)
    }

    /// A digest as a key keeps all 32 bytes: its bytes come back whole, and keys differing in any
    /// byte differ (only the hash reads the first word).
    @Test func aDigestKeyIsTheWholeDigest() {
        let digest = BearerToken.digest("wimz_a_1")
        #expect(DigestKey(digest).bytes == digest && DigestKey(digest) == DigestKey(digest))
        for k in [0, 8, 31] {
            var other = digest
            other[k] ^= 1
            #expect(DigestKey(other) != DigestKey(digest))
        }
    }
}
