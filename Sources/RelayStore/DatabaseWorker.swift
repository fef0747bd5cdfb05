import Synchronization
import RelayCore
import Foundation

/// Runs database jobs (admin API requests) one at a time on its own thread with its own
/// connection, reconnecting as needed, and hands results to a completion (which the relay
/// forwards to its service thread). Jobs fail fast with `.unavailable` while the database is down.
public final class DatabaseWorker: Sendable {
    public typealias Job = @Sendable (PGConnection) throws -> Void

    private let conninfo: String
    private let jobs = Locked<[(job: Job, failed: @Sendable (Error) -> Void)]>([])
    private let signal = DispatchSemaphore(value: 0)
    private let stopping = Atomic<Bool>(false)
    private let started = Atomic<Bool>(false)
    /// Signalled when the thread has left its loop (and closed its connection).
    private let finished = DispatchSemaphore(value: 0)

    public init(conninfo: String) { self.conninfo = conninfo }

    public func start() {
        guard !started.exchange(true, ordering: .sequentiallyConsistent) else { return }
        Thread.detachNewThread { [self] in
            run()
            finished.signal()
        }
    }

    /// Stops taking jobs and waits for the thread to end (the job in hand finishes first; at
    /// most 5 s, so a hung query cannot hold the shutdown).
    public func stop() {
        stopping.store(true, ordering: .sequentiallyConsistent)
        signal.signal()
        // The first stop waits; a second one returns at once.
        if started.exchange(false, ordering: .sequentiallyConsistent) { _ = finished.wait(timeout: .now() + 5) }
    }

    /// Queues `job`; `failed` is called instead when no connection can be had.
    public func submit(_ job: @escaping Job, failed: @escaping @Sendable (Error) -> Void) {
        jobs.withLock { $0.append((job, failed)) }
        signal.signal()
    }

    private func run() {
        var db: PGConnection?
        while !stopping.load(ordering: .sequentiallyConsistent) {
            signal.wait()
            while let next = jobs.withLock({ $0.isEmpty ? nil : $0.removeFirst() }) {
                if db?.isOpen != true { db = try? PGConnection(conninfo: conninfo, connectTimeout: 2) }
                guard let connection = db else {
                    next.failed(StoreError(.unavailable, "database unreachable"))
                    continue
                }
                do {
                    try next.job(connection)
                } catch {
                    if !connection.isOpen { db = nil }
                    next.failed(error)
                }
            }
        }
    }
}
