import RelayCore

import Synchronization

#if canImport(Glibc)
import Glibc
#endif

/// A thread of its own that sleeps in poll(2) on a database socket and a wake pipe, so another
/// thread can interrupt it at once (new work, stop). Used by `StoreMonitor` and `ClusterAgent`.
final class WakeableThread: Sendable {
    private let wakeFD: Int32
    private let wakeWriteFD: Int32
    private let thread = Locked<pthread_t?>(nil)
    private let running = Atomic<Bool>(false)

    init() {
        var fds: [Int32] = [-1, -1]
        _ = pipe(&fds)
        for fd in fds {
            _ = fcntl(fd, F_SETFD, FD_CLOEXEC)
            _ = fcntl(fd, F_SETFL, O_NONBLOCK)
        }
        wakeFD = fds[0]
        wakeWriteFD = fds[1]
    }

    deinit {
        close(wakeFD)
        close(wakeWriteFD)
    }

    /// True from `start` until `stop`: the thread's loop runs while it is.
    var isRunning: Bool { running.load(ordering: .sequentiallyConsistent) }

    /// Runs `body` on a new thread (which keeps whatever `body` captures alive until it returns).
    func start(_ body: @escaping @Sendable () -> Void) {
        running.store(true, ordering: .sequentiallyConsistent)
        final class Box { let body: @Sendable () -> Void; init(_ body: @escaping @Sendable () -> Void) { self.body = body } }
        var tid = pthread_t()
        pthread_create(&tid, nil, { arg in
            Unmanaged<Box>.fromOpaque(arg!).takeRetainedValue().body()
            return nil
        }, Unmanaged.passRetained(Box(body)).toOpaque())
        thread.withLock { $0 = tid }
    }

    /// Wakes the thread's current or next `wait`.
    func wake() {
        var one: UInt8 = 1
        _ = write(wakeWriteFD, &one, 1)
    }

    /// Clears `isRunning`, wakes the thread and waits for it to end.
    func stop() {
        running.store(false, ordering: .sequentiallyConsistent)
        wake()
        join()
    }

    private func join() {
        if let tid = thread.withLock({ t -> pthread_t? in defer { t = nil }; return t }) {
            pthread_join(tid, nil)
        }
    }

    /// Sleeps until `socket` (if any) is readable, `wake()` is called, or `milliseconds` pass.
    func wait(socket: Int32? = nil, milliseconds: Int32) {
        var fds = [pollfd(fd: wakeFD, events: Int16(POLLIN), revents: 0)]
        if let socket { fds.append(pollfd(fd: socket, events: Int16(POLLIN), revents: 0)) }
        _ = poll(&fds, nfds_t(fds.count), milliseconds)
        if fds[0].revents != 0 {
            var sink = [UInt8](repeating: 0, count: 64)
            while read(wakeFD, &sink, sink.count) > 0 {}
        }
    }
}
