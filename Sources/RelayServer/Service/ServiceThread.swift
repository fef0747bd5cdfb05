import RelayCore

#if canImport(Glibc)
import Glibc
#endif

/// The one thread that owns every socket and all relay state (the lws service thread).
/// Components call `assertOnServiceThread()` where they are entered; debug builds check it, as
/// swift-nio's `EventLoop.assertInEventLoop` does, and release builds compile it away. Before
/// `enter()` (while the server is being built, before any other thread exists) every thread
/// passes.
final class ServiceThread: @unchecked Sendable {
    private var owner: pthread_t?

    /// Called by the service loop on its thread before the first callback.
    func enter() { owner = pthread_self() }

    @inline(__always)
    func assertOnServiceThread(file: StaticString = #fileID, line: UInt = #line) {
        assert(owner.map { pthread_equal($0, pthread_self()) != 0 } ?? true, "not on the relay's service thread",
               file: file, line: line)
    }
}

/// Time as the relay's components read it: monotonic nanoseconds for deadlines and rates, wall
/// time for expiries. The system's clocks, called directly (the forwarding path reads the
/// monotonic one per message); tests put in a time source they move by hand.
struct ServiceClock: Sendable {
    /// Nil: the system's clocks.
    let manual: (any ManualTimeSource)?
    /// `manual != nil`, kept apart so the system path never touches the existential.
    private let isManual: Bool

    init(manual: (any ManualTimeSource)?) {
        self.manual = manual
        isManual = manual != nil
    }

    @inline(__always)
    func monotonic() -> UInt64 { isManual ? manual!.monotonic : MonotonicClock.nanoseconds() }

    func wall() -> UnixTime { isManual ? manual!.wall : UnixTime.now() }

    static let system = ServiceClock(manual: nil)
}

/// A clock a test moves by hand.
protocol ManualTimeSource: AnyObject, Sendable {
    var monotonic: UInt64 { get }
    var wall: UnixTime { get }
}
