/// A token bucket: `rate` tokens per second up to `burst`. Time comes from the caller
/// (monotonic nanoseconds), so tests need no sleeping.
public struct TokenBucket: Sendable {
    public let rate: Double
    public let burst: Double
    private var tokens: Double
    private var last: UInt64

    public init(rate: Double, burst: Double, now: UInt64) {
        self.rate = rate
        self.burst = burst
        tokens = burst
        last = now
    }

    /// `bucket` with the token just taken put back.
    public init(restoring bucket: TokenBucket) {
        self = bucket
        tokens = min(burst, tokens + 1)
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

/// A token bucket per key (a token id): the per-token request limits of the HTTP endpoints.
/// Service-thread state; `sweep()` bounds its memory.
public struct KeyedRateLimiter: Sendable {
    public let rate: Double
    public let burst: Double
    private var buckets: [Int64: TokenBucket] = [:]

    public init(rate: Double, burst: Double) {
        self.rate = rate
        self.burst = burst
    }

    /// Takes one token from `key`'s bucket if there is one.
    public mutating func allow(_ key: Int64, now: UInt64) -> Bool {
        var bucket = buckets[key] ?? TokenBucket(rate: rate, burst: burst, now: now)
        let ok = bucket.take(now: now)
        buckets[key] = bucket
        return ok
    }

    /// Forgets every bucket once there are many (a forgotten bucket starts full again).
    public mutating func sweep(over limit: Int = 10_000) {
        if buckets.count > limit { buckets.removeAll() }
    }
}
