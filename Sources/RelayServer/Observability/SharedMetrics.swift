import RelayCore

/// The hub's series: sessions, the missed-event history, forwarding.
extension DeviceHub: MetricsReporting {
    func report(to metrics: MetricsSink) {
        let sessions = allSessions
        for role in Role.allCases {
            metrics.gauge("wimz_sockets", "Open WebSocket sessions by role.", [("role", role.rawValue)],
                          sessions.filter { $0.role == role }.count)
        }
        metrics.gauge("wimz_devices_online", "Devices whose robot is connected.", sessions.filter { $0.role == .robot }.count)
        let history = historyMemory
        metrics.gauge("wimz_history_bytes", "Bytes the missed-event history of every device holds.", history.used)
        metrics.gauge("wimz_history_budget_bytes", "The node's missed-event history budget (WIMZ_RECOVERY_MEMORY).", history.limit)
        metrics.counter("wimz_history_evictions_total", "History messages dropped to stay within the budget.", history.evictions)
        for (direction, count) in [("robot_to_apps", forwarded.robotToApps), ("app_to_robot", forwarded.appToRobot)] {
            metrics.counter("wimz_messages_forwarded_total", "Messages accepted for forwarding, by direction.",
                            [("direction", direction)], count.messages)
            metrics.counter("wimz_bytes_forwarded_total", "Payload bytes accepted for forwarding, by direction.",
                            [("direction", direction)], count.bytes)
        }
    }
}

/// The shared environment's series: the service thread's counters (`RelayCounters`) and the build.
extension RelayEnvironment: MetricsReporting {
    func report(to metrics: MetricsSink) {
        counters.report(to: metrics)
        metrics.gauge("wimz_build_info", "Build information.",
                      [("version", RelayBuild.version), ("event_loop", configuration.eventLoop.rawValue)], 1)
    }
}

extension RelayCounters {
    func report(to metrics: MetricsSink) {
        for (reason, n) in authFailures {
            metrics.counter("wimz_auth_failures_total", "Rejected authentications by reason.", [("reason", reason.rawValue)], n)
        }
        for (reason, n) in drops {
            metrics.counter("wimz_drops_total", "Messages not delivered, by reason.", [("reason", reason.label)], n)
        }
        for (code, n) in closes {
            metrics.counter("wimz_closes_total", "Sockets closed by the relay, by close code.", [("code", String(code))], n)
        }
        for (status, n) in robotHTTPStatuses {
            metrics.counter("wimz_robot_http_requests_total", "HTTP requests to robots answered, by status (relay refusals included).",
                            [("status", String(status))], n)
        }
        metrics.counter("wimz_keepalive_timeouts_total", "Sockets dropped after two silent ping intervals.", keepaliveTimeouts)
        metrics.counter("wimz_token_expiry_closes_total", "Sockets closed (4003) at their token's expiry (a member's until).",
                        tokenExpiryCloses)
        metrics.counter("wimz_http_requests_refused_total", "Request heads refused before routing (400/405/414/431/505).",
                        requestsRefused)
        metrics.counter("wimz_robots_replaced_total", "Robot sockets replaced by a newer one (4001).", robotsReplaced)
        metrics.counter("wimz_database_queue_full_total", "Requests answered 503 busy: the database worker's queue was full.",
                        databaseQueueFull)
        metrics.counter("wimz_pairing_refused_in_memory_total",
                        "Pairing attempts answered 429 without the database (address over its limit).", pairingRefusedInMemory)
        metrics.counter("wimz_cluster_devices_yielded_total", "Devices given up to another node's claim (sockets closed 1012).",
                        devicesYielded)
    }
}
