import Foundation
import Logging
import RelayCore

#if canImport(Glibc)
import Glibc
#endif

/// Takes process signals on one dedicated thread with sigwait(2), so handlers run as ordinary
/// code (no async-signal-safety limits) and lws never sees a signal. Create it before starting
/// any thread: the signals are blocked in the creating thread, and new threads inherit that.
final class SignalWatcher: @unchecked Sendable {
    private var set = sigset_t()
    private var handler: (@Sendable (Int32) -> Void)?

    init(signals: [Int32]) {
        sigemptyset(&set)
        for s in signals { sigaddset(&set, s) }
        pthread_sigmask(SIG_BLOCK, &set, nil)
        signal(SIGPIPE, SIG_IGN)
    }

    /// Calls `handler` on the watcher thread for each signal received.
    func start(_ handler: @escaping @Sendable (Int32) -> Void) {
        self.handler = handler
        var tid = pthread_t()
        pthread_create(&tid, nil, { arg in
            let watcher = Unmanaged<SignalWatcher>.fromOpaque(arg!).takeUnretainedValue()
            while true {
                var received: Int32 = 0
                if sigwait(&watcher.set, &received) == 0 { watcher.handler?(received) }
            }
        }, Unmanaged.passRetained(self).toOpaque())
        pthread_detach(tid)
    }
}

/// The last resort of a stop: if the graceful stop (drain, closes, flushes) has not ended the
/// process within its deadline, whatever hangs, the process exits anyway (status 1). Audit
/// events still queued then are lost, so the deadline is generous (systemd's TimeoutStopSec
/// should be a little longer).
enum StopDeadline {
    static func arm(seconds: Double) {
        guard seconds > 0 else { return }
        Thread.detachNewThread {
            Thread.sleep(forTimeInterval: seconds)
            Logger(label: "wimz.serve").error("stop_deadline_exceeded", metadata: ["seconds": .stringConvertible(seconds)])
            _exit(1)
        }
    }
}
