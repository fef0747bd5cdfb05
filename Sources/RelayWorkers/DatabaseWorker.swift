import Dispatch
import RelayCore
import RelayStore
import Synchronization

/// Runs database jobs (admin API requests) one at a time on its own database thread and hands
/// results to a completion (which the relay forwards to its service thread). Jobs fail fast
/// with `.unavailable` while the database is down.
public final class DatabaseWorker: DatabaseWork {
    public typealias Job = @Sendable (PGConnection) throws -> Void

    private let jobs = Locked<[(job: Job, failed: @Sendable (Error) -> Void)]>([])
    /// Set by `stop`: later jobs fail at once (nobody would run them).
    private let stopped = Atomic<Bool>(false)
    private let thread: DatabaseThread
    /// Jobs that may wait at once; past it `submit` refuses (the caller answers 503), so a flood
    /// of requests that need the database cannot grow the queue without bound.
    public let capacity: Int

    /// `clock` stamps the audit events its jobs' repositories write.
    public init(conninfo: String, node: String? = nil, capacity: Int = 256, clock: RelayClock = .system) {
        thread = DatabaseThread(name: "database_worker", conninfo: conninfo, node: node, clock: clock)
        self.capacity = capacity
    }

    /// Jobs waiting now.
    public var queued: Int { jobs.withLock { $0.count } }

    public func start() { thread.start(self) }

    /// Stops taking jobs and joins the thread: the jobs queued run first when the database
    /// answers, at most 5 s in all, so a hung query cannot hold the shutdown; otherwise they fail
    /// with `.unavailable`.
    public func stop() {
        stopped.store(true, ordering: .sequentiallyConsistent)
        thread.stop()
    }

    /// Queues `job`; `failed` is called instead when no connection can be had. False (and
    /// nothing queued) when `capacity` jobs already wait.
    @discardableResult
    public func submit(_ job: @escaping Job, failed: @escaping @Sendable (Error) -> Void) -> Bool {
        guard !stopped.load(ordering: .sequentiallyConsistent) else {
            failed(StoreError(.unavailable, "the relay is stopping"))
            return true
        }
        let queued = jobs.withLock { queue -> Bool in
            guard queue.count < capacity else { return false }
            queue.append((job, failed))
            return true
        }
        if queued { thread.wake() }
        return queued
    }

    /// Runs `body` on the worker's connection and waits for its result: for the relay's threads
    /// that need the store now and then (the pruner, the TURN cutter) and so hold no connection
    /// of their own. Blocks: never from the service thread.
    public func perform<T: Sendable>(_ body: @escaping @Sendable (PGConnection) throws -> T) throws -> T {
        let outcome = Locked<Result<T, Error>?>(nil)
        let done = DispatchSemaphore(value: 0)
        let queued = submit({ db in
            let result = Result { try body(db) }
            outcome.withLock { $0 = result }
            done.signal()
        }, failed: { error in
            outcome.withLock { $0 = .failure(error) }
            done.signal()
        })
        guard queued else { throw StoreError(.unavailable, "too many jobs wait for the database") }
        done.wait()
        return try outcome.withLock { $0! }.get()
    }

    // MARK: DatabaseWork

    public var channels: [String] { [] }

    public func connected(_ db: PGConnection) throws {}

    public func step(_ db: PGConnection, on thread: DatabaseThread) throws {
        // Idle, the connection's socket is watched too: a server that goes away is noticed now
        // and the connection replaced before the next job, which then does not fail for it.
        if jobs.withLock({ $0.isEmpty }) { thread.wait(socket: db.socket, milliseconds: 1000) }
        try db.verifyOpen()
        while thread.isRunning, let next = nextJob() {
            do {
                try next.job(db)
            } catch {
                next.failed(error)
                // A lost connection goes back to the thread, which reconnects.
                if !db.isOpen { throw error }
            }
        }
    }

    /// No connection: every queued job fails now rather than wait for one.
    public func unavailable(_ error: Error) { failQueued() }

    /// At stop, what is queued still runs when the connection is there (the last state write,
    /// within the thread's stop deadline); otherwise it fails.
    public func finish(_ db: PGConnection?) {
        if let db {
            while let next = nextJob() {
                do { try next.job(db) } catch { next.failed(error) }
            }
        }
        failQueued()
    }

    private func nextJob() -> (job: Job, failed: @Sendable (Error) -> Void)? {
        jobs.withLock { $0.isEmpty ? nil : $0.removeFirst() }
    }

    private func failQueued() {
        let failed = jobs.withLock { j -> [@Sendable (Error) -> Void] in defer { j.removeAll() }; return j.map(\.failed) }
        for fail in failed { fail(StoreError(.unavailable, "database unreachable")) }
    }
}
