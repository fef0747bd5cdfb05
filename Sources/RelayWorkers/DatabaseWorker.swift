import RelayCore
import RelayStore

/// Runs database jobs (admin API requests) one at a time on its own database thread and hands
/// results to a completion (which the relay forwards to its service thread). Jobs fail fast
/// with `.unavailable` while the database is down.
public final class DatabaseWorker: DatabaseWork {
    public typealias Job = @Sendable (PGConnection) throws -> Void

    private let jobs = Locked<[(job: Job, failed: @Sendable (Error) -> Void)]>([])
    private let thread: DatabaseThread
    /// Jobs that may wait at once; past it `submit` refuses (the caller answers 503), so a flood
    /// of requests that need the database cannot grow the queue without bound.
    public let capacity: Int

    public init(conninfo: String, capacity: Int = 256) {
        thread = DatabaseThread(name: "database_worker", conninfo: conninfo)
        self.capacity = capacity
    }

    /// Jobs waiting now.
    public var queued: Int { jobs.withLock { $0.count } }

    public func start() { thread.start(self) }

    /// Stops taking jobs and joins the thread (the job in hand finishes first; at most 5 s, so
    /// a hung query cannot hold the shutdown). Jobs still queued fail with `.unavailable`.
    public func stop() { thread.stop() }

    /// Queues `job`; `failed` is called instead when no connection can be had. False (and
    /// nothing queued) when `capacity` jobs already wait.
    @discardableResult
    public func submit(_ job: @escaping Job, failed: @escaping @Sendable (Error) -> Void) -> Bool {
        let queued = jobs.withLock { queue -> Bool in
            guard queue.count < capacity else { return false }
            queue.append((job, failed))
            return true
        }
        if queued { thread.wake() }
        return queued
    }

    // MARK: DatabaseWork

    public var channels: [String] { [] }

    public func connected(_ db: PGConnection) throws {}

    public func step(_ db: PGConnection, on thread: DatabaseThread) throws {
        if jobs.withLock({ $0.isEmpty }) { thread.wait(milliseconds: 1000) }
        while thread.isRunning, let next = jobs.withLock({ $0.isEmpty ? nil : $0.removeFirst() }) {
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

    public func finish(_ db: PGConnection?) { failQueued() }

    private func failQueued() {
        let failed = jobs.withLock { j -> [@Sendable (Error) -> Void] in defer { j.removeAll() }; return j.map(\.failed) }
        for fail in failed { fail(StoreError(.unavailable, "database unreachable")) }
    }
}
