import RelayCore
import RelayStore
import RelayWorkers

/// Several nodes (docs/cluster.md): presence batches and claims out, claims and handoffs in,
/// and the drain that precedes a stop. Everything here runs on the service thread; the
/// `ClusterAgent` does the database work on its own thread.
extension RelayServer {
    /// Every 100 ms: hands the agent what changed (presence rows, claims), and ends a drain.
    func flushCluster() {
        let now = MonotonicClock.nanoseconds()
        if let until = drainUntil, now >= until { closeForStop() }
        guard clusterBook.hasWork else { return }
        let batch = clusterBook.takeBatch(now: now) { hub.presence(of: $0) }
        cluster.submit(rows: batch.rows, claims: batch.claims)
    }

    func handleCluster(_ event: ClusterEvent) {
        switch event {
        case .registered:
            clusterBook.markAll(hub.deviceIDs)
            log.info("cluster_joined", metadata: ["node": "\(cluster.identity.nodeID)", "address": "\(cluster.identity.address)"])
        case .claimed(let claim):
            yield(claim)
        case .handoffs(let handoffs):
            let now = MonotonicClock.nanoseconds()
            for h in handoffs {
                hub.adoptHandoff(h.deviceID, since: h.statusSince, robotOnline: h.robotOnline, replay: h.replay,
                                 history: h.history, now: now)
            }
        case .view(let live, let split):
            clusterLiveNodes = live
            hub.clustered = live > 1
            clusterSplitDevices = split
        }
    }

    /// Another node accepted a socket of these devices after this one: the sockets here close
    /// with 1012 so their clients reconnect through the balancer and meet on that node; what
    /// the apps must keep (status time, replayed events) is left for it.
    private func yield(_ claim: DeviceClaim) {
        guard !stopping else { return }
        let now = MonotonicClock.nanoseconds()
        var handoffs: [DeviceHandoff] = []
        for device in claim.devices {
            guard let state = hub.handoffState(of: device, now: now) else { continue }
            let closed = hub.close(device: device, code: .reconnectNow, reason: "device moved to another node")
            hub.forget(device)
            guard !closed.isEmpty else { continue }
            clusterBook.yieldedDevice(device, now: now)
            counters.devicesYielded += 1
            handoffs.append(DeviceHandoff(deviceID: device, toNode: claim.node, statusSince: state.since,
                                          robotOnline: state.robotOnline, replay: state.replay, history: state.history))
            log.info("device_moved", metadata: ["device": "\(device.rawValue)", "to_node": "\(claim.node)", "sockets": .stringConvertible(closed.count)])
        }
        cluster.submit(rows: [], claims: [], handoffs: handoffs)
    }

    /// SIGTERM: `/readyz` turns 503 at once so the balancer stops choosing this node; when other
    /// nodes are live, sockets stay open for `drainSeconds` (the balancer's detection time) and
    /// are then told 1012 to reconnect elsewhere at once. A lone node closes with 1001 at once.
    func beginDrain() {
        guard drainUntil == nil, !stopping, !finished else { return }
        cluster.setDraining()
        onStopping?()
        let peers = clusterLiveNodes - 1
        log.info("draining", metadata: ["open_connections": .stringConvertible(openConnections), "live_peers": .stringConvertible(peers), "drain_seconds": .stringConvertible(configuration.drainSeconds)])
        if peers > 0, configuration.drainSeconds > 0 {
            drainUntil = MonotonicClock.nanoseconds() + UInt64(configuration.drainSeconds * 1e9)
        } else {
            closeForStop()
        }
    }

    /// Whether `/readyz` must say 503 because this node is on its way out.
    var isDraining: Bool { drainUntil != nil || stopping }
}

extension RelayServer {
    /// `{"device_id","online","since","apps","nodes","scope"}`: the cluster's view of a device
    /// (every live node's presence rows), merged with this node's own, which is fresher than
    /// its last batch. Without the database: this node's view, `"scope":"node"`.
    func presence(of device: DeviceID, _ request: HTTPRequest) -> HTTPResponse? {
        let local = hub.status(of: device)
        let nodeID = cluster.identity.nodeID
        let holdsHere = local.online || local.apps > 0
        let nodeView = RelayServer.presenceJSON(device: device, online: local.online, since: local.since, apps: local.apps,
                                                nodes: holdsHere ? [nodeID] : [], scope: "node")
        return answerFromDatabase(request, unavailable: .json(200, nodeView)) { db in
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
            return .json(200, RelayServer.presenceJSON(device: device, online: online, since: since, apps: apps,
                                                       nodes: nodes.sorted(), scope: "cluster"))
        }
    }

    static func presenceJSON(device: DeviceID, online: Bool, since: UnixTime, apps: Int, nodes: [String],
                             scope: String) -> JSONValue {
        .object([("device_id", .string(device.rawValue)), ("online", .bool(online)), ("since", .string(since.iso8601)),
                 ("apps", .int(Int64(apps))), ("nodes", .array(nodes.map { .string($0) })), ("scope", .string(scope))])
    }
}
