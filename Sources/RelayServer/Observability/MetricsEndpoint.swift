import Prometheus
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
    private let database: DatabaseExchanges
    private let push: PushCoordinator
    private let turnCutter: TurnSessionCutter
    private let retention: RetentionPruner

    init(env: RelayEnvironment, authenticator: Authenticator, turn: TurnEndpoint, robotHTTP: RobotHTTPEndpoint,
         cluster: ClusterCoordinator, store: StoreSync, stop: StopSequence, database: DatabaseExchanges, push: PushCoordinator,
         turnCutter: TurnSessionCutter, retention: RetentionPruner) {
        self.turnCutter = turnCutter
        self.retention = retention
        self.database = database
        self.push = push
        self.env = env
        self.authenticator = authenticator
        self.turn = turn
        self.robotHTTP = robotHTTP
        self.cluster = cluster
        self.store = store
        self.stop = stop
    }

    /// What each counter was when last copied into the registry (its counters only go up).
    private var exported: [String: Int] = [:]

    /// Sets the registry from the counters and the components' state, then renders it.
    func render() -> HTTPResponse {
        let counters = env.counters
        let sessions = env.hub.allSessions
        for role in Role.allCases {
            gauge("wimz_sockets", "Open WebSocket sessions by role.", [("role", role.rawValue)],
                  sessions.filter { $0.role == role }.count)
        }
        gauge("wimz_devices_online", "Devices whose robot is connected.", sessions.filter { $0.role == .robot }.count)
        let history = env.hub.historyMemory
        gauge("wimz_history_bytes", "Bytes the missed-event history of every device holds.", history.used)
        gauge("wimz_history_budget_bytes", "The node's missed-event history budget (WIMZ_RECOVERY_MEMORY).", history.limit)
        counter("wimz_history_evictions_total", "History messages dropped to stay within the budget.", history.evictions)
        for (reason, n) in counters.authFailures {
            counter("wimz_auth_failures_total", "Rejected authentications by reason.", [("reason", reason.rawValue)], n)
        }
        for (reason, n) in counters.drops {
            counter("wimz_drops_total", "Messages not delivered, by reason.", [("reason", reason.label)], n)
        }
        for (code, n) in counters.closes {
            counter("wimz_closes_total", "Sockets closed by the relay, by close code.", [("code", String(code))], n)
        }
        for (direction, count) in [("robot_to_apps", env.hub.forwarded.robotToApps), ("app_to_robot", env.hub.forwarded.appToRobot)] {
            counter("wimz_messages_forwarded_total", "Messages accepted for forwarding, by direction.",
                    [("direction", direction)], count.messages)
            counter("wimz_bytes_forwarded_total", "Payload bytes accepted for forwarding, by direction.",
                    [("direction", direction)], count.bytes)
        }
        for (status, n) in counters.robotHTTPStatuses {
            counter("wimz_robot_http_requests_total", "HTTP requests to robots answered, by status (relay refusals included).",
                    [("status", String(status))], n)
        }
        gauge("wimz_robot_http_waiting", "HTTP requests waiting for a robot's answer.", robotHTTP.waiting)
        counter("wimz_keepalive_timeouts_total", "Sockets dropped after two silent ping intervals.", counters.keepaliveTimeouts)
        counter("wimz_token_expiry_closes_total", "Sockets closed (4003) at their token's expiry (a member's until).",
                counters.tokenExpiryCloses)
        counter("wimz_http_requests_refused_total", "Request heads refused before routing (400/405/414/431/505).",
                counters.requestsRefused)
        counter("wimz_robots_replaced_total", "Robot sockets replaced by a newer one (4001).", counters.robotsReplaced)
        gauge("wimz_database_queue_depth", "Requests waiting for the database worker.", database.worker.queued)
        for (kind, results) in push.outcomes {
            for (result, n) in results {
                counter("wimz_pushes_total", "Pushes by kind and what became of them (delivered, unregistered, rejected, expired, queue_full, provider_auth).",
                        [("kind", kind), ("result", result.rawValue)], n)
            }
        }
        gauge("wimz_push_queue_depth", "Pushes waiting for the APNs sender.", push.sender?.queueDepth ?? 0)
        gauge("wimz_push_registrations", "Push registrations in this node's mirror.", push.registrationCount)
        gauge("wimz_push_enabled", "1 when an APNs key is configured.", push.isEnabled ? 1 : 0)
        let cuts = turnCutter.stats
        counter("wimz_turn_cuts_total", "Removed members' TURN cuts by this node: done on every TURN server, or to retry.",
                [("outcome", "done")], cuts.cutsDone)
        counter("wimz_turn_cuts_total", "Removed members' TURN cuts by this node: done on every TURN server, or to retry.",
                [("outcome", "retry")], cuts.cutsRetried)
        counter("wimz_turn_sessions_cut_total", "TURN sessions cancelled through coturn's CLI (cs).", cuts.sessionsCut)
        counter("wimz_turn_admin_failures_total", "TURN CLI conversations that failed (unreachable, refused, no prompt).",
                cuts.serverFailures)
        gauge("wimz_turn_cuts_pending", "TURN cuts not done yet, cluster-wide (should return to 0).", cuts.pending)
        let pruned = retention.stats
        for table in RetentionPruner.Table.allCases {
            counter("wimz_retention_deleted_rows_total", "Rows this node pruned past their retention, by table.",
                    [("table", table.rawValue)], pruned.deleted[table.rawValue] ?? 0)
        }
        counter("wimz_retention_rounds_total", "Pruning rounds this node ran holding the cluster's pruning lock.", pruned.rounds)
        counter("wimz_retention_errors_total", "Pruning rounds or table size readings that failed (retried next interval).",
                pruned.errors)
        for size in pruned.sizes {
            gauge("wimz_table_bytes", "Each table's size on disk with its indexes and TOAST, as last read.",
                  [("table", size.table)], Int(size.bytes))
            gauge("wimz_table_rows", "Each table's row count as PostgreSQL estimates it (autovacuum's reltuples).",
                  [("table", size.table)], Int(size.rows))
        }
        counter("wimz_database_queue_full_total", "Requests answered 503 busy: the database worker's queue was full.",
                counters.databaseQueueFull)
        counter("wimz_pairing_refused_in_memory_total", "Pairing attempts answered 429 without the database (address over its limit).",
                counters.pairingRefusedInMemory)
        counter("wimz_turn_credentials_issued_total", "TURN credentials minted (HTTP and push).", turn.service.issued)
        counter("wimz_turn_refresh_pushes_total", "turn_credentials events pushed to robots.", turn.service.pushed)
        let stale = turn.robotsWithStaleCredentials(now: env.clock.wall())
        gauge("wimz_turn_robots_past_refresh", "Online robots whose newest credential is past refresh_at (should be 0).",
              stale.pastRefresh)
        gauge("wimz_turn_robots_past_expiry", "Online robots whose newest credential has expired (should be 0).", stale.pastExpiry)
        let audit = env.audit.writer.stats
        gauge("wimz_audit_queue_depth", "Audit events waiting in memory.", audit.queued)
        counter("wimz_audit_spooled_total", "Audit events written to the spool file.", audit.spooled)
        counter("wimz_audit_rejected_total", "Audit events the database refused, kept in audit-rejected.jsonl.", audit.rejected)
        gauge("wimz_database_up", "1 when the store is reachable and its schema current.", store.health.state == .ready ? 1 : 0)
        gauge("wimz_credentials_cached", "Active tokens in the relay's mirror.", authenticator.credentials.count)
        let clusterStats = cluster.agent.stats
        gauge("wimz_cluster_live_nodes", "Live nodes in the cluster, this one included (as last read).", cluster.liveNodes)
        gauge("wimz_cluster_split_devices", "Devices with sockets on more than one live node (as last read).", cluster.splitDevices)
        let leaseAge = clusterStats.lastRenewal == 0 ? -1 : Int((env.clock.monotonic() - clusterStats.lastRenewal) / 1_000_000_000)
        gauge("wimz_cluster_lease_age_seconds", "Seconds since this node last renewed its lease (-1: never).", leaseAge)
        gauge("wimz_cluster_draining", "1 while this node drains for a stop.", stop.isDraining ? 1 : 0)
        counter("wimz_cluster_presence_rows_total", "Presence rows written.", clusterStats.presenceRows)
        counter("wimz_cluster_presence_statements_total", "Presence SQL statements run (batched).", clusterStats.presenceStatements)
        counter("wimz_cluster_claims_sent_total", "Devices claimed from other nodes.", clusterStats.claimsSent)
        counter("wimz_cluster_devices_yielded_total", "Devices given up to another node's claim (sockets closed 1012).",
                counters.devicesYielded)
        counter("wimz_cluster_registrations_total", "Times this node joined the cluster (> 1: its lease lapsed and it rejoined).",
                clusterStats.registrations)
        counter("wimz_cluster_store_errors_total", "Failed membership or presence writes (retried).", clusterStats.writeFailures)
        gauge("wimz_build_info", "Build information.",
              [("version", RelayVersion.current), ("event_loop", env.configuration.eventLoop.rawValue)], 1)
        return HTTPResponse(status: 200, contentType: "text/plain; version=0.0.4", body: env.metrics.registry.emitToBuffer())
    }

    private func descriptor(_ name: String, _ help: String) -> MetricNameDescriptor {
        MetricNameDescriptor(metricName: name, unitName: "", helpText: help)
    }

    private func gauge(_ name: String, _ help: String, _ value: Int) { gauge(name, help, [], value) }

    private func counter(_ name: String, _ help: String, _ value: Int) { counter(name, help, [], value) }

    private func gauge(_ name: String, _ help: String, _ labels: [(String, String)], _ value: Int) {
        env.metrics.registry.makeGauge(descriptor: descriptor(name, help), labels: labels).set(to: Double(value))
    }

    /// Moves the registry's counter up to `value` (counted elsewhere, as a plain field).
    private func counter(_ name: String, _ help: String, _ labels: [(String, String)], _ value: Int) {
        let key = name + labels.map { "\u{1}\($0.0)=\($0.1)" }.joined()
        let delta = value - (exported[key] ?? 0)
        let counter = env.metrics.registry.makeCounter(descriptor: descriptor(name, help), labels: labels)
        if delta > 0 { counter.increment(by: Int64(delta)) }
        exported[key] = value
    }
}
