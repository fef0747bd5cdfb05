/// A token bucket: `rate` tokens per second up to `burst`. Time comes from the caller
/// (monotonic nanoseconds), so tests need no sleeping.
public struct TokenBucket: Sendable {
    public let rate: Double
    public let burst: Double
    private var tokens: Double
    private var last: UInt64
    /// When a token was last asked for (monotonic nanoseconds).
    public var lastUsed: UInt64 { last }

    public init(rate: Double, burst: Double, now: UInt64) {
        self.rate = rate
        self.burst = burst
        tokens = burst
        last = now
    }

    /// Takes one token if there is one.
    public mutating func take(now: UInt64) -> Bool {
        if now > last {
            tokens = min(burst, tokens + Double(now - last) / 1e9 * rate)
            last = now
        }
        guard tokens >= 1 else { return false }
        tokens -= 1
        return true
    }
}

/// A token bucket per key (a token id, a client address): the per-token request limits of the
/// HTTP endpoints and the per-address failure limit. At most `capacity` keys are tracked; past
/// that the least recently used one is forgotten (an attacker with many keys cannot reset
/// everyone's buckets). `sweep(now:)` forgets buckets idle long enough to be full again.
public struct KeyedRateLimiter<Key: Hashable>: Sendable where Key: Sendable {
    public let rate: Double
    public let burst: Double
    private var buckets: LRUTable<Key, TokenBucket>

    public init(rate: Double, burst: Double, capacity: Int = 10_000) {
        self.rate = rate
        self.burst = burst
        buckets = LRUTable(capacity: capacity)
    }

    public var count: Int { buckets.count }

    /// Takes one token from `key`'s bucket if there is one.
    public mutating func allow(_ key: Key, now: UInt64) -> Bool {
        var bucket = buckets.use(key) ?? TokenBucket(rate: rate, burst: burst, now: now)
        let ok = bucket.take(now: now)
        buckets.set(key, bucket)
        return ok
    }

    /// Whether `key`'s bucket has a token, without taking it (a key never seen has a full one).
    public func wouldAllow(_ key: Key, now: UInt64) -> Bool {
        guard var bucket = buckets.peek(key) else { return true }
        return bucket.take(now: now)
    }

    /// Forgets buckets unused for as long as refilling them takes (they are full again).
    public mutating func sweep(now: UInt64) {
        let refill = UInt64(burst / rate * 1e9)
        buckets.removeOldest { now > $0.lastUsed && now - $0.lastUsed > refill }
    }
}
