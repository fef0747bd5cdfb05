/// Reconnect delays: capped exponential back-off with full jitter, so a fleet of apps that lost
/// the relay at the same moment does not come back in lock-step.
public struct Backoff: Sendable {
    /// The first ceiling; it doubles per failed attempt up to `cap`.
    public var base: Duration
    public var cap: Duration
    /// Added when the relay asked us to slow down (HTTP 429, close 4029 or 4008), with its own cap.
    public var slowFloor: Duration
    public var slowCap: Duration
    /// Failed attempts since the last successful connection.
    public private(set) var attempt = 0

    public init(base: Duration = .milliseconds(500), cap: Duration = .seconds(30),
                slowFloor: Duration = .seconds(5), slowCap: Duration = .seconds(120)) {
        self.base = base
        self.cap = cap
        self.slowFloor = slowFloor
        self.slowCap = slowCap
    }

    /// The delay before the next attempt (uniform in [0, min(cap, base·2ⁿ)], plus `slowFloor`
    /// when `slow`); counts one more failed attempt.
    public mutating func nextDelay<R: RandomNumberGenerator>(slow: Bool = false, using generator: inout R) -> Duration {
        nextDelay(slow: slow, fraction: Double.random(in: 0...1, using: &generator))
    }

    public mutating func nextDelay(slow: Bool = false) -> Duration {
        nextDelay(slow: slow, fraction: Double.random(in: 0...1))
    }

    private mutating func nextDelay(slow: Bool, fraction: Double) -> Duration {
        let cap = slow ? slowCap : self.cap
        let ceiling = min(cap, base * (1 << min(attempt, 30)))
        attempt += 1
        let delay = ceiling * fraction
        return slow ? min(cap, delay + slowFloor) : delay
    }

    /// Called once a connection is established.
    public mutating func reset() { attempt = 0 }
}
