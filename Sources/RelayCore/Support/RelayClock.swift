/// Time as the relay's components read it: monotonic nanoseconds for deadlines and rates, wall
/// time for expiries. The system's clocks, called directly (the forwarding path reads the
/// monotonic one per message); tests put in a time source they move by hand.
public struct RelayClock: Sendable {
    /// Nil: the system's clocks.
    public let manual: (any ManualTimeSource)?
    /// `manual != nil`, kept apart so the system path never touches the existential.
    private let isManual: Bool

    public init(manual: (any ManualTimeSource)?) {
        self.manual = manual
        isManual = manual != nil
    }

    @inline(__always)
    public func monotonic() -> UInt64 { isManual ? manual!.monotonic : MonotonicClock.nanoseconds() }

    public func wall() -> UnixTime { isManual ? manual!.wall : UnixTime.now() }

    public static let system = RelayClock(manual: nil)
}

/// A clock a test moves by hand.
public protocol ManualTimeSource: AnyObject, Sendable {
    var monotonic: UInt64 { get }
    var wall: UnixTime { get }
}

/// A clock a test (or a benchmark) moves by hand.
public final class ManualClock: ManualTimeSource, @unchecked Sendable {
    private let lock = Locked<(monotonic: UInt64, wallMicros: Int64)>((0, 0))

    public init(monotonic: UInt64 = 1_000_000_000, wall: UnixTime = UnixTime(microseconds: 1_795_000_000_000_000)) {
        lock.withLock { $0 = (monotonic, wall.microseconds) }
    }

    public var clock: RelayClock { RelayClock(manual: self) }
    public var monotonic: UInt64 { lock.withLock { $0.monotonic } }
    public var wall: UnixTime { lock.withLock { UnixTime(microseconds: $0.wallMicros) } }

    public func advance(seconds: Double) {
        lock.withLock {
            $0.monotonic += UInt64(seconds * 1e9)
            $0.wallMicros += Int64(seconds * 1e6)
        }
    }
}
