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

