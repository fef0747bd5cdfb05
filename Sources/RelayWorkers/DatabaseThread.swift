import Logging
import RelayCore
import RelayStore
import Synchronization

#if canImport(Glibc)
import Glibc
#endif

/// How long a database thread waits before it tries to connect again: 0.2 s after the first
/// failure, doubling up to 1 s. Short, because every worker's outage is visible (`/readyz`, the
/// audit spool, the cluster lease); capped, so a long outage costs one attempt a second.
public struct ReconnectPolicy: Sendable, Equatable {
    public var firstDelay: Double = 0.2
    public var maxDelay: Double = 1.0

    public init() {}

    /// The wait after `failures` consecutive failures (1 or more).
    public func delay(afterFailures failures: Int) -> Double {
        min(maxDelay, firstDelay * Double(1 << min(max(failures - 1, 0), 16)))
    }
}

/// What one database thread does. `DatabaseThread` owns the thread, the connection, the
/// `LISTEN`s and the reconnects; the work only sees a live connection. Every method is called
/// on that thread, one at a time.
public protocol DatabaseWork: AnyObject, Sendable {
    /// Channels `LISTEN`ed on every new connection.
    var channels: [String] { get }
    /// After each (re)connect, before the first `step`.
    func connected(_ db: PGConnection) throws
    /// One round with a live connection. Waits through `thread.wait` (woken by `thread.wake()`,
    /// the stop, or a notification on `db`). A thrown error is reported to `unavailable` and the
    /// thread backs off (and reconnects if the connection is gone).
    func step(_ db: PGConnection, on thread: DatabaseThread) throws
    /// A connect failed or a `step` threw; the thread backs off next.
    func unavailable(_ error: Error)
    /// Once, at stop, on the thread: the connection if it is still open.
    func finish(_ db: PGConnection?)
}

/// What a thread without a connection of its own does: it borrows the database worker's
/// (`DatabaseWorker.perform`) for what it asks of the store, so it holds no connection at rest.
public protocol ThreadWork: AnyObject, Sendable {
    /// One round; waits through `thread.wait` (woken by `thread.wake()` or the stop).
    func step(on thread: DatabaseThread)
}

/// A thread of its own with one PostgreSQL connection, kept by one `ReconnectPolicy`. It sleeps
/// in poll(2) on the connection's socket and a wake pipe, so another thread can interrupt it at
/// once (new work, stop); `stop` waits for the thread to end and joins it.
public final class DatabaseThread: Sendable {
    public let name: String
    private let conninfo: String
    private let clock: RelayClock
    /// `wimz-relay/<node>/<name>`: how an operator tells the relay's connections apart in
    /// `pg_stat_activity` (nil: libpq's default).
    public let applicationName: String?
    private let policy: ReconnectPolicy
    private let wakeFD: Int32
    private let wakeWriteFD: Int32
    private let thread = Locked<pthread_t?>(nil)
    private let running = Atomic<Bool>(false)
    private let ended = Locked<Bool>(false)
    private let log: Logger
    /// Connections of this process that were working and were lost (a failover, a restart, a
    /// primary demoted), each replaced: `wimz_database_connections_replaced_total`.
    public static let connectionsReplaced = Atomic<Int>(0)

    /// `clock`: what its connections stamp the repositories' audit events with (`PGConnection.clock`).
    public init(name: String, conninfo: String, node: String? = nil, policy: ReconnectPolicy = ReconnectPolicy(),
                clock: RelayClock = .system) {
        self.name = name
        self.conninfo = conninfo
        self.clock = clock
        applicationName = node.map { "wimz-relay/\($0)/\(name)" }
        self.policy = policy
        log = Logger(label: "wimz.\(name)")
        var fds: [Int32] = [-1, -1]
        _ = pipe(&fds)
        for fd in fds {
            _ = fcntl(fd, F_SETFD, FD_CLOEXEC)
            _ = fcntl(fd, F_SETFL, O_NONBLOCK)
        }
        wakeFD = fds[0]
        wakeWriteFD = fds[1]
    }

    /// A thread without a connection of its own (for a `ThreadWork`).
    public convenience init(name: String) { self.init(name: name, conninfo: "") }

    deinit {
        close(wakeFD)
        close(wakeWriteFD)
    }

    /// True from `start` until `stop`: the work runs while it is.
    public var isRunning: Bool { running.load(ordering: .sequentiallyConsistent) }

    /// Starts the thread running `work` (which it keeps alive until it ends). Once.
    public func start(_ work: DatabaseWork) { spawn { [self] in run(work) } }

    /// Starts the thread running `work` with no connection of its own (`conninfo` unused). Once.
    public func start(_ work: ThreadWork) {
        spawn { [self] in
            while isRunning { work.step(on: self) }
        }
    }

    private func spawn(_ body: @escaping () -> Void) {
        guard !running.exchange(true, ordering: .sequentiallyConsistent) else { return }
        final class Box { let body: () -> Void; init(_ body: @escaping () -> Void) { self.body = body } }
        var tid = pthread_t()
        pthread_create(&tid, nil, { arg in
            Unmanaged<Box>.fromOpaque(arg!).takeRetainedValue().body()
            return nil
        }, Unmanaged.passRetained(Box { [self] in
            DatabaseThread.nameCurrentThread(name)
            body()
            ended.withLock { $0 = true }
        }).toOpaque())
        thread.withLock { $0 = tid }
    }

    /// Names the calling thread for `top -H` and /proc/PID/task/*/comm (15 bytes at most).
    /// Written to /proc: glibc's pthread_setname_np is not visible to Swift here.
    private static func nameCurrentThread(_ name: String) {
        let fd = open("/proc/thread-self/comm", O_WRONLY | O_CLOEXEC)
        guard fd >= 0 else { return }
        let bytes = Array(name.utf8.prefix(15))
        _ = bytes.withUnsafeBytes { write(fd, $0.baseAddress, $0.count) }
        close(fd)
    }

    /// Stops the work and joins the thread. Returns false when the thread did not end within
    /// `timeout` seconds (a query that hangs): it is then left to the process's exit, so a hung
    /// database cannot hold a shutdown.
    @discardableResult
    public func stop(timeout: Double = 5) -> Bool {
        running.store(false, ordering: .sequentiallyConsistent)
        wake()
        guard let tid = thread.withLock({ t -> pthread_t? in defer { t = nil }; return t }) else { return true }
        let deadline = MonotonicClock.nanoseconds() + UInt64(timeout * 1e9)
        while !ended.withLock({ $0 }) {
            if MonotonicClock.nanoseconds() >= deadline {
                pthread_detach(tid)
                log.error("thread_stop_timeout", metadata: ["thread": "\(name)", "seconds": .stringConvertible(timeout)])
                return false
            }
            usleep(2_000)
        }
        pthread_join(tid, nil)
        return true
    }

    /// Wakes the thread's current or next `wait`.
    public func wake() {
        var one: UInt8 = 1
        _ = write(wakeWriteFD, &one, 1)
    }

    /// Sleeps until `socket` (if any) is readable, `wake()` or `stop()` is called, or
    /// `milliseconds` pass.
    public func wait(socket: Int32? = nil, milliseconds: Int32) {
        guard isRunning else { return }
        var fds = [pollfd(fd: wakeFD, events: Int16(POLLIN), revents: 0)]
        if let socket { fds.append(pollfd(fd: socket, events: Int16(POLLIN), revents: 0)) }
        _ = poll(&fds, nfds_t(fds.count), milliseconds)
        if fds[0].revents != 0 {
            var sink = [UInt8](repeating: 0, count: 64)
            while read(wakeFD, &sink, sink.count) > 0 {}
        }
    }

    /// The notifications that arrived on `db`, waiting up to `milliseconds` for one. Those libpq
    /// already took in during a query come back at once: polling the socket for them would sleep
    /// the whole timeout (a revocation would wait a second to close its sockets).
    public func notifications(on db: PGConnection, waitingUpTo milliseconds: Int32) throws -> [PGNotification] {
        let ready = try db.drainNotifications()
        guard ready.isEmpty else { return ready }
        wait(socket: db.socket, milliseconds: milliseconds)
        return try db.drainNotifications()
    }

    private func run(_ work: DatabaseWork) {
        var db: PGConnection?
        var failures = 0
        while isRunning {
            do {
                if db?.isOpen != true {
                    db = nil
                    let connection = try PGConnection(conninfo: conninfo, connectTimeout: 2, applicationName: applicationName,
                                                      clock: clock)
                    for channel in work.channels { try connection.execute("LISTEN \(identifier: channel)") }
                    try work.connected(connection)
                    db = connection
                }
                try work.step(db!, on: self)
                failures = 0
            } catch {
                let lost = db != nil && db?.isOpen != true
                if db?.isOpen != true { db = nil }
                failures += 1
                // A connection that was working and is lost (a failover, a restart) is replaced at
                // once before the work hears of it: the new primary may already be there.
                if lost {
                    DatabaseThread.connectionsReplaced.add(1, ordering: .relaxed)
                    log.warning("database_connection_lost", metadata: ["thread": "\(name)", "reason": "\(error)"])
                }
                if lost, failures == 1 { continue }
                work.unavailable(error)
                wait(milliseconds: Int32(policy.delay(afterFailures: failures) * 1000))
            }
        }
        work.finish(db?.isOpen == true ? db : nil)
    }
}
