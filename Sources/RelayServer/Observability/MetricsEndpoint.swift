import RelayCore
import RelayWorkers

/// `GET /metrics`: Prometheus text exposition (format 0.0.4) of the service thread's counters
/// and the components' gauges, rendered at scrape time.
final class MetricsEndpoint {
    private let env: RelayEnvironment
    private let authenticator: Authenticator
    private let turn: TurnEndpoint
    private let robotHTTP: RobotHTTPEndpoint
    private let cluster: ClusterCoordinator
    private let store: StoreSync
    private let stop: StopSequence

    init(env: RelayEnvironment, authenticator: Authenticator, turn: TurnEndpoint, robotHTTP: RobotHTTPEndpoint,
         cluster: ClusterCoordinator, store: StoreSync, stop: StopSequence) {
        self.env = env
        self.authenticator = authenticator
        self.turn = turn
        self.robotHTTP = robotHTTP
        self.cluster = cluster
        self.store = store
        self.stop = stop
    }

    func render() -> HTTPResponse {
        let counters = env.counters
        let configuration = env.configuration
        var out = ""
        func metric(_ name: String, _ type: String, _ help: String, _ samples: [(labels: String, value: Int)]) {
            out += "# HELP \(name) \(help)\n# TYPE \(name) \(type)\n"
            for s in samples { out += "\(name)\(s.labels.isEmpty ? "" : "{\(s.labels)}") \(s.value)\n" }
        }
        let sessions = env.hub.allSessions
        metric("wimz_sockets", "gauge", "Open WebSocket sessions by role.",
               Role.allCases.map { role in ("role=\"\(role.rawValue)\"", sessions.filter { $0.role == role }.count) })
        metric("wimz_devices_online", "gauge", "Devices whose robot is connected.",
               [("", sessions.filter { $0.role == .robot }.count)])
        metric("wimz_auth_failures_total", "counter", "Rejected authentications by reason.",
               counters.authFailures.sorted { $0.key.rawValue < $1.key.rawValue }.map { ("reason=\"\($0.key.rawValue)\"", $0.value) })
        metric("wimz_drops_total", "counter", "Messages not delivered, by reason.",
               counters.drops.sorted { $0.key.rawValue < $1.key.rawValue }.map { ("reason=\"\($0.key.rawValue)\"", $0.value) })
        metric("wimz_closes_total", "counter", "Sockets closed by the relay, by close code.",
               counters.closes.sorted { $0.key < $1.key }.map { ("code=\"\($0.key)\"", $0.value) })
        metric("wimz_messages_forwarded_total", "counter", "Messages accepted for forwarding, by direction.",
               [("direction=\"robot_to_apps\"", counters.forwardedMessages[RelayCounters.Direction.robotToApps.rawValue]),
                ("direction=\"app_to_robot\"", counters.forwardedMessages[RelayCounters.Direction.appToRobot.rawValue])])
        metric("wimz_bytes_forwarded_total", "counter", "Payload bytes accepted for forwarding, by direction.",
               [("direction=\"robot_to_apps\"", counters.forwardedBytes[RelayCounters.Direction.robotToApps.rawValue]),
                ("direction=\"app_to_robot\"", counters.forwardedBytes[RelayCounters.Direction.appToRobot.rawValue])])
        func histogram(_ name: String, _ help: String, _ h: Histogram) {
            out += "# HELP \(name) \(help)\n# TYPE \(name) histogram\n"
            for (bound, count) in zip(h.bounds, h.counts) { out += "\(name)_bucket{le=\"\(bound)\"} \(count)\n" }
            out += "\(name)_bucket{le=\"+Inf\"} \(h.count)\n\(name)_sum \(h.sum)\n\(name)_count \(h.count)\n"
        }
        histogram("wimz_handshake_seconds", "WebSocket handshake latency, accept to established.", counters.handshakeSeconds)
        metric("wimz_robot_http_requests_total", "counter", "HTTP requests to robots answered, by status (relay refusals included).",
               counters.robotHTTPStatuses.sorted { $0.key < $1.key }.map { ("status=\"\($0.key)\"", $0.value) })
        histogram("wimz_robot_http_duration_seconds", "HTTP to the robot: request read to answer written (requests that reached a robot).",
                  counters.robotHTTPSeconds)
        metric("wimz_robot_http_waiting", "gauge", "HTTP requests waiting for a robot's answer.", [("", robotHTTP.waiting)])
        metric("wimz_keepalive_timeouts_total", "counter", "Sockets dropped after two silent ping intervals.",
               [("", counters.keepaliveTimeouts)])
        metric("wimz_http_requests_refused_total", "counter", "Request heads refused before routing (400/405/414/431/505).",
               [("", counters.requestsRefused)])
        metric("wimz_robots_replaced_total", "counter", "Robot sockets replaced by a newer one (4001).",
               [("", counters.robotsReplaced)])
        metric("wimz_turn_credentials_issued_total", "counter", "TURN credentials minted (HTTP and push).", [("", turn.service.issued)])
        metric("wimz_turn_refresh_pushes_total", "counter", "turn_credentials events pushed to robots.", [("", turn.service.pushed)])
        let stale = turn.robotsWithStaleCredentials(now: env.clock.wall())
        metric("wimz_turn_robots_past_refresh", "gauge", "Online robots whose newest credential is past refresh_at (should be 0).",
               [("", stale.pastRefresh)])
        metric("wimz_turn_robots_past_expiry", "gauge", "Online robots whose newest credential has expired (should be 0).",
               [("", stale.pastExpiry)])
        let audit = env.audit.writer.stats
        metric("wimz_audit_queue_depth", "gauge", "Audit events waiting in memory.", [("", audit.queued)])
        metric("wimz_audit_spooled_total", "counter", "Audit events written to the spool file.", [("", audit.spooled)])
        metric("wimz_database_up", "gauge", "1 when the store is reachable and its schema current.",
               [("", store.health.state == .ready ? 1 : 0)])
        metric("wimz_credentials_cached", "gauge", "Active tokens in the relay's mirror.", [("", authenticator.credentials.count)])
        let clusterStats = cluster.agent.stats
        metric("wimz_cluster_live_nodes", "gauge", "Live nodes in the cluster, this one included (as last read).",
               [("", cluster.liveNodes)])
        metric("wimz_cluster_split_devices", "gauge", "Devices with sockets on more than one live node (as last read).",
               [("", cluster.splitDevices)])
        let leaseAge = clusterStats.lastRenewal == 0 ? -1 : Int((env.clock.monotonic() - clusterStats.lastRenewal) / 1_000_000_000)
        metric("wimz_cluster_lease_age_seconds", "gauge", "Seconds since this node last renewed its lease (-1: never).",
               [("", leaseAge)])
        metric("wimz_cluster_draining", "gauge", "1 while this node drains for a stop.", [("", stop.isDraining ? 1 : 0)])
        metric("wimz_cluster_presence_rows_total", "counter", "Presence rows written.", [("", clusterStats.presenceRows)])
        metric("wimz_cluster_presence_statements_total", "counter", "Presence SQL statements run (batched).",
               [("", clusterStats.presenceStatements)])
        metric("wimz_cluster_claims_sent_total", "counter", "Devices claimed from other nodes.", [("", clusterStats.claimsSent)])
        metric("wimz_cluster_devices_yielded_total", "counter", "Devices given up to another node's claim (sockets closed 1012).",
               [("", counters.devicesYielded)])
        metric("wimz_cluster_registrations_total", "counter", "Times this node joined the cluster (> 1: its lease lapsed and it rejoined).",
               [("", clusterStats.registrations)])
        metric("wimz_cluster_store_errors_total", "counter", "Failed membership or presence writes (retried).",
               [("", clusterStats.writeFailures)])
        out += "# HELP wimz_build_info Build information.\n# TYPE wimz_build_info gauge\n"
        out += "wimz_build_info{version=\"\(RelayServer.version)\",event_loop=\"\(configuration.eventLoop.rawValue)\"} 1\n"
        return HTTPResponse(status: 200, contentType: "text/plain; version=0.0.4", body: Array(out.utf8))
    }
}
