import Logging
import RelayCore
import RelayStore
import RelayWorkers

/// The cluster as this node last read it: written by ``ClusterCoordinator`` (the agent's view),
/// read by the stop sequence (whether peers can take this node's sockets). Service thread only.
final class ClusterMembership {
    /// Live nodes, this one included, and devices with sockets on several nodes.
    fileprivate(set) var liveNodes = 1
    fileprivate(set) var splitDevices = 0
}

/// Several nodes (docs/cluster.md): presence batches and claims out, claims and handoffs in,
/// and the cluster's view of a device for the status routes. Everything here runs on the
/// service thread; its `ClusterAgent` does the database work on its own thread.
final class ClusterCoordinator {
    let agent: ClusterAgent
    /// The cluster as last read (this coordinator writes it; the stop sequence reads it).
    let membership: ClusterMembership
    private let env: RelayEnvironment
    private let hub: DeviceHub
    private let database: DatabaseExchanges
    /// A stopping node yields nothing more.
    private let stop: StopSequence
    private var book: ClusterBook

    init(env: RelayEnvironment, hub: DeviceHub, agent: ClusterAgent, membership: ClusterMembership, database: DatabaseExchanges,
         stop: StopSequence) {
        self.env = env
        self.hub = hub
        self.agent = agent
        self.membership = membership
        self.database = database
        self.stop = stop
        book = ClusterBook(dampingWindow: UInt64(env.configuration.clusterMoveDampingSeconds * 1e9))
    }

    /// This node's counts for its membership row (the 1 s tick).
    func report(sockets: Int, devices: Int) { agent.report(sockets: sockets, devices: devices) }

    /// The first socket of `device` on this node attached: claimed from other nodes (damped).
    func deviceArrived(_ device: DeviceID) { book.deviceArrived(device, now: env.clock.monotonic()) }

    /// A socket of `device` attached or detached: its presence row is written with the next batch.
    func presenceChanged(_ device: DeviceID, robotLeftAt: UnixTime?) { book.changed(device, robotLeftAt: robotLeftAt) }

    var nodeID: String { agent.identity.nodeID }

    /// Every 100 ms: hands the agent what changed (presence rows, claims).
    func flush() {
        guard book.hasWork else { return }
        let batch = book.takeBatch(now: env.clock.monotonic()) { hub.presence(of: $0) }
        agent.submit(rows: batch.rows, claims: batch.claims)
    }

    /// A request for a device whose robot is not here while other nodes are live: claim it, as a
    /// first socket would, so the robot reconnects to this node.
    func claimIfClustered(_ device: DeviceID, now: UInt64) {
        if membership.liveNodes > 1 { book.deviceArrived(device, now: now) }
    }

    func handle(_ event: ClusterEvent) {
        switch event {
        case .registered:
            book.markAll(hub.deviceIDs)
            env.log.info("cluster_joined", metadata: ["node": "\(agent.identity.nodeID)", "address": "\(agent.identity.address)"])
        case .claimed(let claim):
            yield(claim)
        case .handoffs(let handoffs):
            let now = env.clock.monotonic()
            for h in handoffs {
                hub.adoptHandoff(h.deviceID, since: h.statusSince, robotOnline: h.robotOnline, replay: h.replay,
                                     history: h.history, now: now, wallClock: env.clock.wall())
            }
        case .view(let live, let split):
            membership.liveNodes = live
            hub.clustered = live > 1
            membership.splitDevices = split
        }
    }

    /// Another node accepted a socket of these devices after this one: the sockets here close
    /// with 1012 so their clients reconnect through the balancer and meet on that node; what
    /// the apps must keep (status time, replayed events) is left for it.
    private func yield(_ claim: DeviceClaim) {
        guard !stop.stopping else { return }
        let now = env.clock.monotonic()
        var handoffs: [DeviceHandoff] = []
        for device in claim.devices {
            guard let state = hub.handoffState(of: device, now: now) else { continue }
            let closed = hub.close(device: device, code: .reconnectNow, reason: "device moved to another node")
            hub.forget(device)
            guard !closed.isEmpty else { continue }
            book.yieldedDevice(device, now: now)
            env.counters.devicesYielded += 1
            handoffs.append(DeviceHandoff(deviceID: device, toNode: claim.node, statusSince: state.since,
                                          robotOnline: state.robotOnline, replay: state.replay, history: state.history))
            env.log.info("device_moved", metadata: ["device": "\(device.rawValue)", "to_node": "\(claim.node)",
                                                    "sockets": .stringConvertible(closed.count)])
        }
        agent.submit(rows: [], claims: [], handoffs: handoffs)
    }

    /// `{"device_id","online","since","apps","nodes","scope"}`: the cluster's view of a device
    /// (every live node's presence rows), merged with this node's own, which is fresher than
    /// its last batch. Without the database: this node's view, `"scope":"node"`.
    /// `member`: an app caller's own access (v1.3), added to the answer.
    func presence(of device: DeviceID, _ request: HTTPRequest, member: JSONValue? = nil) -> HTTPResponse? {
        let local = hub.status(of: device)
        let nodeID = self.nodeID
        let holdsHere = local.online || local.apps > 0
        let nodeView = Self.presenceJSON(device: device, online: local.online, since: local.since, apps: local.apps,
                                         nodes: holdsHere ? [nodeID] : [], scope: "node", member: member)
        return database.answer(request, unavailable: .json(200, nodeView)) { db in
            let shared = try ClusterRepository(db).presence(of: [device])[device]
            var online = shared?.online ?? false
            var since = shared?.since ?? local.since
            var nodes = shared?.nodes ?? []
            var apps = shared?.apps ?? 0
            if local.online, !online || local.since < since {
                online = true
                since = local.since
            }
            if holdsHere, !nodes.contains(nodeID) { nodes.append(nodeID) }
            apps = max(apps, local.apps)
            return .json(200, Self.presenceJSON(device: device, online: online, since: since, apps: apps,
                                                nodes: nodes.sorted(), scope: "cluster", member: member))
        }
    }

    static func presenceJSON(device: DeviceID, online: Bool, since: UnixTime, apps: Int, nodes: [String],
                             scope: String, member: JSONValue?) -> JSONValue {
        .object([("device_id", .string(device.rawValue)), ("online", .bool(online)), ("since", .string(since.iso8601)),
                 ("apps", .int(Int64(apps))), ("nodes", .array(nodes.map { .string($0) })), ("scope", .string(scope))]
                + (member.map { [("member", $0)] } ?? []))
    }
}

extension ClusterCoordinator: MetricsReporting {
    func report(to metrics: MetricsSink) {
        let stats = agent.stats
        metrics.gauge("wimz_cluster_live_nodes", "Live nodes in the cluster, this one included (as last read).", membership.liveNodes)
        metrics.gauge("wimz_cluster_split_devices", "Devices with sockets on more than one live node (as last read).", membership.splitDevices)
        let leaseAge = stats.lastRenewal == 0 ? -1 : Int((env.clock.monotonic() - stats.lastRenewal) / 1_000_000_000)
        metrics.gauge("wimz_cluster_lease_age_seconds", "Seconds since this node last renewed its lease (-1: never).", leaseAge)
        metrics.counter("wimz_cluster_presence_rows_total", "Presence rows written.", stats.presenceRows)
        metrics.counter("wimz_cluster_presence_statements_total", "Presence SQL statements run (batched).", stats.presenceStatements)
        metrics.counter("wimz_cluster_claims_sent_total", "Devices claimed from other nodes.", stats.claimsSent)
        metrics.counter("wimz_cluster_registrations_total", "Times this node joined the cluster (> 1: its lease lapsed and it rejoined).",
                        stats.registrations)
        metrics.counter("wimz_cluster_store_errors_total", "Failed membership or presence writes (retried).", stats.writeFailures)
    }
}
