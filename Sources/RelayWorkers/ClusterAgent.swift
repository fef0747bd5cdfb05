import Logging
import RelayCore
import RelayStore

#if canImport(Glibc)
import Glibc
#endif

/// What the agent reports to the relay's service thread (through its mailbox).
public enum ClusterEvent: Sendable {
    /// The node (re)joined: every device's presence must be written again.
    case registered
    /// Another node claimed devices: close this node's sockets of them (1012).
    case claimed(DeviceClaim)
    /// State left by nodes that gave devices up to this one.
    case handoffs([DeviceHandoff])
    /// The cluster as last read: live nodes (this one included) and split devices.
    case view(liveNodes: Int, splitDevices: Int)
}

/// Counters the agent keeps for /metrics (read from any thread).
public struct ClusterStats: Sendable {
    public var presenceRows = 0
    public var presenceStatements = 0
    public var claimsSent = 0
    /// Joins, the first included: more than one means the lease lapsed and the node rejoined.
    public var registrations = 0
    public var writeFailures = 0
    /// Monotonic time of the last successful lease renewal (0: never).
    public var lastRenewal: UInt64 = 0
}

/// A database thread that keeps this node's membership lease,
/// writes the presence batches and claims the service thread hands it, removes dead nodes,
/// and turns `wimz_cluster` notifications into `ClusterEvent`s. Nothing here is on the
/// forwarding path: the service thread only appends to a locked outbox.
public final class ClusterAgent: DatabaseWork {
    public struct Identity: Sendable {
        public var nodeID: String
        public var address: String
        public var incarnation: String
        public init(nodeID: String, address: String, incarnation: String) {
            self.nodeID = nodeID
            self.address = address
            self.incarnation = incarnation
        }
    }

    struct Outbox {
        var rows: [PresenceRow] = []
        var claims: [DeviceID] = []
        var handoffs: [DeviceHandoff] = []
        var sockets = 0
        var devices = 0
        var draining = false
        var renewNow = false
    }

    public let identity: Identity
    private let leaseSeconds: Double
    private let onEvent: @Sendable (ClusterEvent) -> Void
    private let outbox = Locked(Outbox())
    private let statistics = Locked(ClusterStats())
    private let thread: DatabaseThread
    private let log = Logger(label: "wimz.cluster")
    /// The agent thread's own state, locked only to satisfy `Sendable`.
    private let lease = Locked<(registered: Bool, nextRenewal: UInt64, renewals: Int)>((false, 0, 0))

    public init(conninfo: String, identity: Identity, leaseSeconds: Double,
                onEvent: @escaping @Sendable (ClusterEvent) -> Void) {
        self.identity = identity
        self.leaseSeconds = leaseSeconds
        self.onEvent = onEvent
        thread = DatabaseThread(name: "cluster_agent", conninfo: conninfo, node: identity.nodeID)
    }

    public var stats: ClusterStats { statistics.withLock { $0 } }

    public func start() { thread.start(self) }

    /// Writes what is queued, leaves the cluster (its presence goes with its row) and joins the
    /// thread. With the database unreachable the lease simply runs out.
    public func stop() { thread.stop() }

    /// Queues a presence batch and claims (service thread; never blocks on the database).
    public func submit(rows: [PresenceRow], claims: [DeviceID], handoffs: [DeviceHandoff] = []) {
        guard !rows.isEmpty || !claims.isEmpty || !handoffs.isEmpty else { return }
        outbox.withLock {
            $0.rows += rows
            $0.claims += claims
            $0.handoffs += handoffs
        }
        thread.wake()
    }

    /// The node's size for its lease row (service thread, once a second).
    public func report(sockets: Int, devices: Int) {
        outbox.withLock {
            $0.sockets = sockets
            $0.devices = devices
        }
    }

    /// Marks the node draining at once (the next renewal carries it).
    public func setDraining() {
        outbox.withLock {
            $0.draining = true
            $0.renewNow = true
        }
        thread.wake()
    }

    // MARK: DatabaseWork

    public var channels: [String] { [StoreNotification.clusterChannel] }

    /// A new connection registers again (the lease may have lapsed while it was away).
    public func connected(_ db: PGConnection) throws {
        lease.withLock { $0.registered = false }
    }

    public func step(_ db: PGConnection, on thread: DatabaseThread) throws {
        let repo = ClusterRepository(db)
        let now = MonotonicClock.nanoseconds()
        let renewNow = outbox.withLock { o -> Bool in defer { o.renewNow = false }; return o.renewNow }
        var (registered, nextRenewal, renewals) = lease.withLock { $0 }
        if !registered || now >= nextRenewal || renewNow {
            let size = outbox.withLock { ($0.sockets, $0.devices, $0.draining) }
            let renewed = try registered && repo.renew(
                node: identity.nodeID, incarnation: identity.incarnation, leaseSeconds: leaseSeconds,
                sockets: size.0, devices: size.1, draining: size.2)
            if !renewed {
                try repo.register(node: identity.nodeID, incarnation: identity.incarnation,
                                  address: identity.address, leaseSeconds: leaseSeconds)
                registered = true
                statistics.withLock { $0.registrations += 1 }
                // The handoffs left while this node was away are for a previous life.
                _ = try repo.takeHandoffs(node: identity.nodeID)
                onEvent(.registered)
            }
            statistics.withLock { $0.lastRenewal = MonotonicClock.nanoseconds() }
            nextRenewal = now + 1_000_000_000
            renewals += 1
            lease.withLock { $0 = (registered, nextRenewal, renewals) }
            try repo.purgeExpired()
            if renewals % 5 == 1 {
                try repo.pruneHandoffs()
                let live = try repo.nodes().filter(\.isLive).count
                onEvent(.view(liveNodes: live, splitDevices: try repo.splitDevices()))
            }
        }
        try flush(repo)
        try waitForNotifications(db, on: thread, until: nextRenewal)
    }

    public func unavailable(_ error: Error) {
        statistics.withLock { $0.writeFailures += 1 }
        log.warning("cluster_store_error", metadata: ["reason": "\(error)"])
    }

    /// Graceful stop: what is queued, then leave (a crash instead leaves the lease to expire).
    public func finish(_ db: PGConnection?) {
        guard let db, lease.withLock({ $0.registered }) else { return }
        let repo = ClusterRepository(db)
        do {
            try flush(repo)
            try repo.deregister(node: identity.nodeID, incarnation: identity.incarnation)
        } catch {
            log.warning("cluster_leave_failed", metadata: ["reason": "\(error)"])
        }
    }
    /// Writes the outbox. On failure the batch goes back in front (written on the next try).
    private func flush(_ repo: ClusterRepository) throws {
        let batch = outbox.withLock { o -> Outbox in
            defer { o.rows.removeAll(); o.claims.removeAll(); o.handoffs.removeAll() }
            return o
        }
        guard !batch.rows.isEmpty || !batch.claims.isEmpty || !batch.handoffs.isEmpty else { return }
        do {
            // Later rows of the same device supersede earlier ones.
            var latest: [DeviceID: PresenceRow] = [:]
            for row in batch.rows {
                var row = row
                if row.robotLeftAt == nil, let earlier = latest[row.deviceID]?.robotLeftAt { row.robotLeftAt = earlier }
                latest[row.deviceID] = row
            }
            let statements = try repo.writePresence(node: identity.nodeID, Array(latest.values))
            try repo.handOff(batch.handoffs)
            try repo.claim(node: identity.nodeID, batch.claims)
            statistics.withLock {
                $0.presenceRows += latest.count
                $0.presenceStatements += statements
                $0.claimsSent += batch.claims.count
            }
        } catch {
            outbox.withLock {
                $0.rows = batch.rows + $0.rows
                $0.claims = batch.claims + $0.claims
                $0.handoffs = batch.handoffs + $0.handoffs
            }
            throw error
        }
    }

    private func waitForNotifications(_ db: PGConnection, on thread: DatabaseThread, until deadline: UInt64) throws {
        let now = MonotonicClock.nanoseconds()
        let timeout = deadline > now ? Int32(min((deadline - now) / 1_000_000, 1000)) : 0
        var handoffsWaiting = false
        for note in try thread.notifications(on: db, waitingUpTo: timeout) {
            switch StoreNotification(note) {
            case .claim(let node, let devices)? where node != identity.nodeID:
                onEvent(.claimed(DeviceClaim(node: node, devices: devices)))
            case .handoff(let node)? where node == identity.nodeID:
                handoffsWaiting = true
            default:
                continue
            }
        }
        if handoffsWaiting {
            let taken = try ClusterRepository(db).takeHandoffs(node: identity.nodeID)
            if !taken.isEmpty { onEvent(.handoffs(taken)) }
        }
    }
}
