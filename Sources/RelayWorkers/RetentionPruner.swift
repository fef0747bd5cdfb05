import Logging
import RelayCore
import RelayStore

/// Keeps the tables that grow with every event within the operator's retention
/// (docs/operations.md "Retention"): a thread of its own that borrows the database worker's
/// connection one statement at a time (requests queued meanwhile go in between), never the
/// service thread's or the audit writer's. Every `interval` it takes the cluster's pruning lock
/// (one node prunes at a time; the others skip the round) and deletes old rows a batch at a time,
/// with a pause between batches so the deletes never hold the disk for long; at start and after
/// each round it reads every table's size for `/metrics`.
public final class RetentionPruner: ThreadWork {
    public typealias Table = RetentionRepository.Table

    /// What to prune and how fast.
    public struct Policy: Sendable, Equatable {
        /// Days each table's rows are kept; a table that is absent (0 in the settings) is kept for ever.
        public var days: [Table: Int]
        /// Seconds between rounds.
        public var interval: Double
        /// Rows one statement deletes (docs/performance.md "Session 24: retention at 10 million rows").
        public var batch = 5_000
        /// Seconds between two batches of a round.
        public var pause = 0.05
        /// A device's timeline retention unless its owner chose another (v1.6): what its day
        /// partitions are pruned by (`TimelinePartitions`).
        public var timelineDays = 30

        public init(days: [Table: Int], interval: Double) {
            self.days = days.filter { $0.value > 0 }
            self.interval = interval
        }

        /// The settings' policy, a retention for every table (a new table does not compile without
        /// one). A finished TURN cut is kept past the cutter's expiry scan, which looks back
        /// `max(allocationLifetime, 1 day)` for expired tokens without a cut: pruned sooner, an
        /// expiry would be cut and audited twice.
        public init(_ configuration: RelayConfiguration) {
            let scanDays = max(configuration.turnMaxAllocationLifetime, 86_400) / 86_400 + 1
            let days = Dictionary(uniqueKeysWithValues: Table.allCases.map { table -> (Table, Int) in
                switch table {
                case .auditLog: (table, configuration.auditRetentionDays)
                case .turnIssuances: (table, configuration.turnIssuanceRetentionDays)
                case .pairingCodes: (table, configuration.pairingRetentionDays)
                case .turnCuts:
                    (table, configuration.turnCutRetentionDays == 0 ? 0 : max(configuration.turnCutRetentionDays, scanDays))
                }
            })
            self.init(days: days, interval: configuration.retentionIntervalSeconds)
            timelineDays = configuration.timelineDays
        }
    }

    /// What the pruner did and saw, for `/metrics`.
    public struct Counts: Sendable, Equatable {
        /// Rows deleted by this node, by table.
        public var deleted: [String: Int] = [:]
        /// Rounds this node ran holding the lock.
        public var rounds = 0
        /// Rounds that failed with the database reachable (retried at the next interval).
        public var errors = 0
        /// Every table's size as last read.
        public var sizes: [RetentionRepository.TableSize] = []
        /// The timeline's day partitions dropped by this node (v1.6).
        public var partitionsDropped = 0
    }

    private let policy: Policy
    private let worker: DatabaseWorker
    private let thread = DatabaseThread(name: "retention")
    private let counts = Locked(Counts())
    /// When the next round is due (0: read the sizes first).
    private let nextRound = Locked<UInt64>(0)
    private let log = Logger(label: "wimz.retention")

    public init(worker: DatabaseWorker, policy: Policy) {
        self.policy = policy
        self.worker = worker
    }

    public func start() { thread.start(self) }
    public func stop() { thread.stop() }

    public var stats: Counts { counts.withLock { $0 } }

    // MARK: ThreadWork

    public func step(on thread: DatabaseThread) {
        let now = MonotonicClock.nanoseconds()
        let (first, due) = nextRound.withLock { next -> (Bool, Bool) in
            let first = next == 0
            guard first || now >= next else { return (false, false) }
            // Set before the round: a failing one is tried again next interval, not at once.
            next = now + UInt64(policy.interval * 1e9)
            return (first, !first)
        }
        do {
            // The timeline's next days' partitions, at start and every round (made ahead: a row no
            // day partition covers would wait in the default one).
            if first || due { _ = try worker.perform { try TimelinePartitions($0).makePartitions(now: $0.clock.wall()) } }
            if due { try prune(on: thread) }
            if first || due {
                let sizes = try worker.perform { try RetentionRepository($0).tableSizes() }
                counts.withLock { $0.sizes = sizes }
            }
        } catch {
            // An outage fails the round too; `wimz_database_up` tells those apart.
            if due { counts.withLock { $0.errors += 1 } }
            if first { nextRound.withLock { $0 = 0 } }  // the sizes are read again in a second
            log.warning("retention_failed", metadata: ["reason": "\(error)"])
        }
        let next = nextRound.withLock { $0 }, later = MonotonicClock.nanoseconds()
        thread.wait(milliseconds: next > later ? Int32(clamping: min((next - later) / 1_000_000, 1_000)) : 1_000)
    }

    /// One round under the cluster's lock: each table's old rows, a batch at a time, until a
    /// batch comes back short or the relay stops.
    private func prune(on thread: DatabaseThread) throws {
        guard try worker.perform({ try RetentionRepository($0).tryLock() }) else {
            log.debug("retention_skipped", metadata: ["reason": "another node is pruning"])
            return
        }
        defer { _ = try? worker.perform { try RetentionRepository($0).unlock() } }
        let policy = self.policy
        let started = MonotonicClock.nanoseconds()
        var deleted: [String: Int] = [:]
        for table in Table.allCases {
            guard let days = policy.days[table] else { continue }
            while thread.isRunning {
                let n = try worker.perform { try RetentionRepository($0).pruneBatch(table, olderThanDays: days, limit: policy.batch) }
                deleted[table.rawValue, default: 0] += n
                counts.withLock { $0.deleted[table.rawValue, default: 0] += n }
                guard n == policy.batch else { break }
                thread.wait(milliseconds: Int32(policy.pause * 1000))
            }
        }
        deleted["timeline_entries"] = try pruneTimeline(on: thread)
        counts.withLock { $0.rounds += 1 }
        guard deleted.values.contains(where: { $0 > 0 }) else { return }
        var metadata: Logger.Metadata = ["ms": .stringConvertible((MonotonicClock.nanoseconds() - started) / 1_000_000)]
        for (table, n) in deleted where n > 0 { metadata[table] = .stringConvertible(n) }
        log.info("retention_pruned", metadata: metadata)
    }

    /// The timeline's old entries: whole day partitions past every device's retention, else the
    /// rows past their device's, a batch at a time. Rows deleted (a dropped partition's not counted).
    private func pruneTimeline(on thread: DatabaseThread) throws -> Int {
        let policy = self.policy
        var deleted = 0
        while thread.isRunning {
            let step = try worker.perform { try TimelinePartitions($0).pruneStep(now: $0.clock.wall(), defaultDays: policy.timelineDays,
                                                                                 limit: policy.batch) }
            switch step {
            case .nothing: return deleted
            case .dropped(let partition):
                counts.withLock { $0.partitionsDropped += 1 }
                log.info("timeline_partition_dropped", metadata: ["partition": "\(partition)"])
            case .deleted(let n):
                deleted += n
                counts.withLock { $0.deleted["timeline_entries", default: 0] += n }
            }
            thread.wait(milliseconds: Int32(policy.pause * 1000))
        }
        return deleted
    }
}
