import WimzProtocol

/// Every setting of `wimz-relay serve`, once: the CLI's help and parsing, `validate()`, the env
/// example (`systemd/wimz-relay.env.example`) and the README's table are made from this table
/// (`wimz-relay options` prints the generated files; a test keeps them equal).
public enum ServeOptions {
    public static let all: [ServeOption] = service + turn + tls + websocket + robotHTTP + recovery + push + cluster + retention

    static let service: [ServeOption] = [
        .custom("WIMZ_DATABASE_URL", "database-url", .service, "PostgreSQL: libpq conninfo or postgresql:// URL (required).",
                defaultText: nil, example: "postgresql://wimz_relay:CHANGE-ME@db.internal/wimz?sslmode=verify-full") {
            $0.databaseURL = $1
        },
        .custom("WIMZ_MIGRATIONS_DIR", "migrations-dir", .service, "Directory of the numbered SQL migrations.",
                defaultText: "beside the binary (the package's: /usr/share/wimz-relay/migrations)",
                describing: true) {
            $0.migrationsDirectory = $1
        },
        .custom("WIMZ_LISTEN", "listen", .service,
                "host:port to listen on (IPv6 as [::1]:8080); port 0 picks a free one (logged). Behind a TLS proxy keep it on loopback or a private address.",
                defaultText: "127.0.0.1:8080") { config, text throws(ConfigurationError) in
            guard let (host, port) = RelayConfiguration.parseListen(text) else {
                throw ConfigurationError("invalid listen address '\(text.prefix(80))': expected host:port")
            }
            (config.listenHost, config.listenPort) = (host, port)
        },
        .optional("WIMZ_ADMIN_TOKEN", nil, .service, \.adminToken,
                  "Bearer token of the admin API (off without one): at least 128 bits, e.g. `openssl rand -hex 32`, or the relay refuses to start. Never on the command line."),
        .custom("WIMZ_ADMIN_TOKEN_FILE", "admin-token-file", .service,
                "A file holding the admin token instead (root:wimz-relay 0640; the package makes this one with a strong token on its first install; an empty file: no admin API).",
                defaultText: nil, example: "/etc/wimz-relay/admin-token") { config, path throws(ConfigurationError) in
            guard let contents = FileContents.read(path) else { throw ConfigurationError("cannot read the admin token file \(path)") }
            let token = String(decoding: contents, as: UTF8.self).trimmingASCIIWhitespace()
            config.adminToken = token.isEmpty ? nil : token  // an empty file: no admin API, as without one
        },
        .custom("WIMZ_LOG_LEVEL", "log-level", .service, "debug, info, warn or error.", defaultText: "info") {
            config, text throws(ConfigurationError) in
            guard let level = LogLevel(name: text) else {
                throw ConfigurationError("invalid log level '\(text.prefix(80))': use debug, info, warn or error")
            }
            config.logLevel = level
        },
        .custom("WIMZ_EVENT_LOOP", "event-loop", .service, "libev (epoll; needs libwebsockets-evlib-ev) or poll.",
                defaultText: RelayConfiguration.defaults.eventLoop.rawValue) { config, text throws(ConfigurationError) in
            guard let loop = RelayConfiguration.EventLoop(rawValue: text) else {
                throw ServeOption.invalid("WIMZ_EVENT_LOOP", text, "libev or poll")
            }
            config.eventLoop = loop
        },
        .int("WIMZ_MAX_DESCRIPTORS", "max-descriptors", .service, \.maxDescriptors, .from(1024, to: 1_048_576),
             "Descriptors (sockets and a few files) the relay may hold, at most the hard RLIMIT_NOFILE; every close costs ~4.5 ns per descriptor allowed (lws scans its table), so size it to the node's peak. The kernel's descriptor table is made this size at start (8 bytes a descriptor), so a storm of sockets never waits for it to grow."),
        .text("WIMZ_SPOOL_DIR", "spool-dir", .service, \.spoolDirectory,
              "Where audit events wait while the database is unreachable (and at a stop without it), and where rows the database refused are kept (`audit-rejected.jsonl`).",
              example: "/var/lib/wimz-relay/spool"),
        .custom("WIMZ_TRUSTED_PROXIES", "trusted-proxies", .service,
                "Comma-separated proxy IPs whose X-Forwarded-For is believed (the right-most hop that is not one of them).",
                defaultText: nil) { config, text in config.trustedProxies = Set(ServeOptions.list(text)) },
        .number("WIMZ_AUTH_FAILURE_BURST", "auth-failure-burst", .service, \.authFailureBurst, .atLeast(1),
                "Failed authentications per address (IPv6: per /64) in a burst before its failing attempts get 429; valid credentials always pass."),
        .number("WIMZ_AUTH_FAILURE_RATE", "auth-failure-rate", .service, \.authFailureRate, .positive,
                "Failed authentications per address refilled per second."),
        .number("WIMZ_STOP_TIMEOUT", "stop-timeout", .service, \.stopTimeoutSeconds, .positive,
                "Seconds after SIGTERM before the process exits whatever it is doing."),
    ]

    static let turn: [ServeOption] = [
        .custom("WIMZ_TURN_URLS", "turn-urls", .turn, "Comma-separated TURN URLs handed out with credentials.",
                defaultText: nil,
                example: "turn:turn.example.com:3478?transport=udp,turn:turn.example.com:3478?transport=tcp,turns:turn.example.com:5349?transport=tcp") {
            config, text in config.turnURLs = ServeOptions.list(text)
        },
        .optional("WIMZ_TURN_SECRET", "turn-secret", .turn, \.turnStaticSecret,
                  "Static TURN secret (coturn's static-auth-secret); unset: the secrets live in the database."),
        .text("WIMZ_TURN_REALM", "turn-realm", .turn, \.turnRealm,
              "TURN realm ([A-Za-z0-9_.-]{1,64}; coturn's realm): credentials are signed, and the admin API and CLI manage secrets, in it."),
        .int("WIMZ_TURN_TTL", "turn-ttl", .turn, \.turnTTL, .atLeast(1), "Default credential lifetime, seconds."),
        .int("WIMZ_TURN_TTL_MIN", "turn-ttl-min", .turn, \.turnTTLMin, .atLeast(1), "Smallest ?ttl= honoured, seconds."),
        .int("WIMZ_TURN_TTL_MAX", "turn-ttl-max", .turn, \.turnTTLMax, .atLeast(1), "Largest ?ttl= honoured, seconds."),
        .text("WIMZ_TURN_USERNAME_SEPARATOR", "turn-username-separator", .turn, \.turnUsernameSeparator,
              "Between the expiry and the user id in usernames: punctuation without spaces or quotes."),
        .number("WIMZ_TURN_REQUEST_RATE", "turn-request-rate", .turn, \.turnRequestRate, .positive,
                "Credential requests per second per token (burst 10)."),
        .custom("WIMZ_TURN_ADMIN", "turn-admin", .turn,
                "Comma-separated host:port of every TURN server's management CLI (coturn's cli-ip/cli-port, on a private address; e.g. 10.0.0.5:5766,10.0.0.6:5766): a removed member's sessions are cut there. Unset: removal only stops issuing.",
                defaultText: nil, example: nil) { config, text throws(ConfigurationError) in
            guard let servers = TurnAdminServer.parseList(text) else {
                throw ConfigurationError("invalid WIMZ_TURN_ADMIN '\(text.prefix(120))': expected host:port[,host:port…]")
            }
            config.turnAdminServers = servers
        },
        .optional("WIMZ_TURN_ADMIN_PASSWORD", nil, .turn, \.turnAdminPassword,
                  "The TURN CLI's password (coturn's cli-password). Prefer WIMZ_TURN_ADMIN_PASSWORD_FILE."),
        .custom("WIMZ_TURN_ADMIN_PASSWORD_FILE", "turn-admin-password-file", .turn,
                "A file holding the TURN CLI's password (root:wimz-relay 0640), e.g. /etc/wimz-relay/turn-cli-password.",
                defaultText: nil, example: nil) { config, path throws(ConfigurationError) in
            guard let contents = FileContents.read(path) else { throw ConfigurationError("cannot read the TURN CLI password file \(path)") }
            let password = String(decoding: contents, as: UTF8.self).trimmingASCIIWhitespace()
            config.turnAdminPassword = password.isEmpty ? nil : password
        },
        .int("WIMZ_TURN_MAX_ALLOCATION_LIFETIME", "turn-max-allocation-lifetime", .turn, \.turnMaxAllocationLifetime, .atLeast(60),
             "coturn's max-allocate-lifetime, seconds: credentials that expired longer ago than this have no session left to cut."),
    ]

    static let tls: [ServeOption] = [
        .optional("WIMZ_TLS_CERT", "tls-cert", .tls, \.tlsCertificatePath,
                  "PEM certificate chain (with WIMZ_TLS_KEY; SIGHUP re-reads both)."),
        .optional("WIMZ_TLS_KEY", "tls-key", .tls, \.tlsKeyPath, "PEM private key (with WIMZ_TLS_CERT; root:wimz-relay 0640, read by the service user)."),
    ]

    static let websocket: [ServeOption] = [
        .int("WIMZ_PING_INTERVAL", "ping-interval", .websocket, \.pingIntervalSeconds, .atLeast(1),
             "Seconds between pings; silent for two intervals: closed."),
        .number("WIMZ_TCP_RTO_MAX", "tcp-rto-max", .websocket, \.tcpRetransmitCapSeconds, .from(1, to: 120),
                "Longest wait between TCP retransmissions to a client, seconds (Linux 6.15's TCP_RTO_MAX_MS; the kernel's own is 120): after a phone's tunnel the relay's next try reaches it this soon, not up to minutes later."),
        .int("WIMZ_TCP_USER_TIMEOUT", "tcp-user-timeout", .websocket, \.tcpUserTimeoutSeconds, .from(0, to: 3600),
             "Seconds sent data may go unacknowledged before a client's socket is dropped (TCP_USER_TIMEOUT; 0: the kernel's retries decide): two ping intervals, when the relay's own ping rule gives up too."),
        .int("WIMZ_TCP_KEEPALIVE", "tcp-keepalive", .websocket, \.tcpKeepaliveSeconds, .from(0, to: 7200),
             "Seconds of quiet before TCP keepalive probes a client, then a probe every quarter of that, four at most (0: none): the ping interval, so a socket that sends no pings yet is found dead as soon as one that does."),
        .number("WIMZ_CREDENTIAL_HOLD", "credential-hold", .websocket, \.credentialHoldSeconds, .from(0, to: 60),
                "Seconds a request or upgrade waits for its token to be read from the store before it gets 503 (was WIMZ_UPGRADE_HOLD, still read)."),
        .int("WIMZ_CREDENTIAL_CACHE", "credential-cache", .websocket, \.credentialCacheSize, .from(1000, to: 10_000_000),
             "Tokens kept in memory, least recently used forgotten first (more than the node's sockets)."),
        .int("WIMZ_MAX_MESSAGE_BYTES", "max-message-bytes", .websocket, \.maxMessageBytes,
             .from(1, to: Double(RelayConfiguration.maxMessageBytesLimit)), "Largest message; over it: close 1009."),
        .int("WIMZ_MAX_APPS_PER_DEVICE", "max-apps-per-device", .websocket, \.maxAppsPerDevice, .atLeast(1),
             "App sockets per device; over it: 429."),
        .number("WIMZ_APP_RATE_LIMIT", "app-rate-limit", .websocket, \.appRateLimitPerSecond, .positive,
                "App messages per second per socket."),
        .number("WIMZ_APP_RATE_BURST", "app-rate-burst", .websocket, \.appRateLimitBurst, .atLeast(1),
                "App message burst per socket."),
        .int("WIMZ_SEND_QUEUE_MESSAGES", "send-queue-messages", .websocket, \.sendQueueMaxMessages, .atLeast(1),
             "Per-socket send queue, messages; over it: close 4008."),
        .int("WIMZ_SEND_QUEUE_BYTES", "send-queue-bytes", .websocket, \.sendQueueMaxBytes, .atLeast(1024),
             "Per-socket send queue, bytes; over it: close 4008."),
    ]

    static let robotHTTP: [ServeOption] = [
        .int("WIMZ_ROBOT_HTTP_MAX_BODY", "robot-http-max-body", .robotHTTP, \.robotHTTPMaxBody,
             .from(0, to: Double(RelayConfiguration.robotHTTPMaxBodyLimit)), "Largest body to and from the robot's API through the relay, bytes; over it: 413."),
        .number("WIMZ_ROBOT_HTTP_TIMEOUT", "robot-http-timeout", .robotHTTP, \.robotHTTPTimeoutSeconds, .positive(upTo: 300),
                "Seconds the robot has to answer completely; then 504."),
        .number("WIMZ_ROBOT_HTTP_RATE", "robot-http-rate", .robotHTTP, \.robotHTTPRate, .positive,
                "Requests to the robot per second per app token; over it: 429."),
        .number("WIMZ_ROBOT_HTTP_BURST", "robot-http-burst", .robotHTTP, \.robotHTTPBurst, .atLeast(1),
                "Burst of requests to the robot per app token."),
        .int("WIMZ_ROBOT_HTTP_MAX_PENDING", "robot-http-max-pending", .robotHTTP, \.robotHTTPMaxPending, .atLeast(1),
             "Requests waiting for one robot at once; over it: 429."),
    ]

    static let recovery: [ServeOption] = [
        .int("WIMZ_RECOVERY_MESSAGES", "recovery-messages", .recovery, \.recoveryMessages, .from(1, to: 65_536),
             "Missed-event history: messages kept per device (apps that connect with recover=1)."),
        .number("WIMZ_RECOVERY_SECONDS", "recovery-seconds", .recovery, \.recoverySeconds, .positive(upTo: 3600),
                "Missed-event history: seconds a message is kept."),
        .int("WIMZ_RECOVERY_MEMORY", "recovery-memory", .recovery, \.recoveryMemoryBytes, .atLeast(1_048_576),
             "Missed-event history: bytes every device's history may hold together on this node; past it the least recently resumed devices lose their oldest messages (their resume then gets recovered:false and the replay)."),
        .int("WIMZ_PAIRING_CODE_TTL", "pairing-code-ttl", .recovery, \.pairingCodeSeconds, RelayConfiguration.pairingCodeRange,
             "Seconds a pairing code stays valid: the robot's, the admin API's and the CLI's codes unless they ask for another."),
    ]

    static let push: [ServeOption] = [
        .optional("WIMZ_APNS_KEY_FILE", "apns-key-file", .push, \.apnsKeyFile,
                  "APNs .p8 key (root:wimz-relay 0640, read by the service user); without it no push is sent and push registrations answer 501. SIGHUP re-reads it."),
        .optional("WIMZ_APNS_KEY_ID", "apns-key-id", .push, \.apnsKeyID, "The key's id (the JWT's kid), with a key."),
        .optional("WIMZ_APNS_TEAM_ID", "apns-team-id", .push, \.apnsTeamID, "The Apple team id (the JWT's iss), with a key."),
        .optional("WIMZ_APNS_TOPIC", "apns-topic", .push, \.apnsTopic, "The app's bundle id (apns-topic), with a key."),
        .text("WIMZ_APNS_URL", "apns-url", .push, \.apnsURL, "APNs production base URL."),
        .text("WIMZ_APNS_SANDBOX_URL", "apns-sandbox-url", .push, \.apnsSandboxURL, "APNs sandbox base URL."),
        .optional("WIMZ_APNS_CA_FILE", "apns-ca-file", .push, \.apnsCAFile,
                  "A CA certificate to trust for APNs besides the system's (a stand-in in tests)."),
        .number("WIMZ_PUSH_INTERVAL", "push-interval", .push, \.pushIntervalSeconds, .positive,
                "Seconds of one push window per registration and kind."),
        .number("WIMZ_PUSH_OFFLINE_AFTER", "push-offline-after", .push, \.pushOfflineAfterSeconds, .atLeast(0),
                "Seconds a robot must be gone before robot_offline is pushed."),
        .int("WIMZ_LIVE_ACTIVITY_STALE_AFTER", "live-activity-stale-after", .push, \.liveActivityStaleAfter, .from(30, to: 3600),
             "Seconds after a Live Activity request's timestamp that the lock screen shows it stale (its stale-date); a retry older than this is dropped."),
        .int("WIMZ_LIVE_ACTIVITY_ALERTS_PER_HOUR", "live-activity-alerts-per-hour", .push, \.liveActivityAlertsPerHour, .atLeast(0),
             "Priority-10 Live Activity updates (a change of status) per activity in any hour; further ones go at priority 5."),
        .number("WIMZ_LIVE_ACTIVITY_INTERVAL", "live-activity-interval", .push, \.liveActivityIntervalSeconds, .from(1, to: 60),
                "Seconds between two coalesced priority-5 Live Activity updates of one activity (the newest state always goes last)."),
        .int("WIMZ_LIVE_ACTIVITY_DISMISS_AFTER", "live-activity-dismiss-after", .push, \.liveActivityDismissAfter, .from(0, to: 14400),
             "Seconds an ended mission's Live Activity stays on the lock screen (its dismissal-date)."),
    ]

    static let cluster: [ServeOption] = [
        .optional("WIMZ_NODE_ID", "node-id", .cluster, \.nodeID, "This node's id in the cluster ([A-Za-z0-9_.:-]{1,128}).",
                  defaultText: "hostname:port", accept: NodeName.isValid, wants: "[A-Za-z0-9_.:-]{1,128}"),
        .optional("WIMZ_NODE_ADDRESS", "node-address", .cluster, \.nodeAddress, "The address other nodes and operators see.",
                  defaultText: "hostname:port", accept: NodeName.isValid, wants: "[A-Za-z0-9_.:-]{1,128}"),
        .number("WIMZ_CLUSTER_LEASE", "cluster-lease", .cluster, \.clusterLeaseSeconds, .atLeast(2),
                "Seconds a node stays a member without renewing its lease."),
        .number("WIMZ_MOVE_DAMPING", "move-damping", .cluster, \.clusterMoveDampingSeconds, .atLeast(0),
                "Seconds a device that moved to another node must stay away before it is claimed back."),
        .number("WIMZ_DRAIN", "drain", .cluster, \.drainSeconds, .atLeast(0),
                "SIGTERM with other nodes live: seconds /readyz says 503 before sockets are told 1012."),
    ]

    static let retention: [ServeOption] = [
        .int("WIMZ_AUDIT_RETENTION_DAYS", "audit-retention-days", .retention, \.auditRetentionDays, .from(0, to: 36_500),
             "Days an audit log row is kept (0: for ever). Pruned by the relay in small batches, one node at a time."),
        .int("WIMZ_TURN_ISSUANCE_RETENTION_DAYS", "turn-issuance-retention-days", .retention, \.turnIssuanceRetentionDays,
             .from(0, to: 36_500), "Days a TURN issuance row is kept after its credential expired (0: for ever)."),
        .int("WIMZ_PAIRING_RETENTION_DAYS", "pairing-retention-days", .retention, \.pairingRetentionDays, .from(0, to: 36_500),
             "Days a pairing code or invitation is kept after it expired, used or not (0: for ever)."),
        .int("WIMZ_TURN_CUT_RETENTION_DAYS", "turn-cut-retention-days", .retention, \.turnCutRetentionDays, .from(0, to: 36_500),
             "Days a finished TURN cut (a removal's) is kept (0: for ever; at least 2 days while the expiry scan may look at it)."),
        .number("WIMZ_RETENTION_INTERVAL", "retention-interval", .retention, \.retentionIntervalSeconds, .from(1, to: 86_400),
                "Seconds between pruning rounds (and table size readings for /metrics): frequent rounds keep each one small."),
        .int("WIMZ_TIMELINE_DAYS", "timeline-days", .retention, \.timelineDays, .from(1, to: 36_500),
             "Days a device's timeline keeps its entries unless its owner chose another (v1.6)."),
        .int("WIMZ_TIMELINE_MAX_DAYS", "timeline-max-days", .retention, \.timelineMaxDays, .from(1, to: 36_500),
             "The longest timeline retention an owner may choose: whole day partitions go once past it."),
    ]

    /// The option named `env`.
    public static func option(_ env: String) -> ServeOption? { all.first { $0.env == env } }

    /// Settings renamed, by their old names: an old name is still read (its new one wins) so
    /// that an env file written for an earlier release keeps working.
    public static let renamed: [String: String] = ["WIMZ_UPGRADE_HOLD": "WIMZ_CREDENTIAL_HOLD"]

    /// The defaults with just the settings `names` taken from `environment` and range-checked:
    /// for commands that act for the relay (the TURN realm, the pairing TTL) without serving.
    public static func configuration(reading names: [String], environment: [String: String]) throws(ConfigurationError)
        -> RelayConfiguration {
        var config = RelayConfiguration.defaults
        for option in all where names.contains(option.env) {
            guard let text = environment[option.env], !text.isEmpty else { continue }
            try option.apply(&config, text)
            try option.checkRange(config)
        }
        return config
    }

    /// A comma-separated list, trimmed, without empty entries.
    static func list(_ text: String) -> [String] {
        text.split(separator: ",").map { String($0).trimmingASCIIWhitespace() }.filter { !$0.isEmpty }
    }

    /// The configuration `arguments` (`--flag value` or `--flag=value`) and `environment` say
    /// (a flag wins over its variable; empty variables count as unset), validated.
    public static func configuration(arguments: [String], environment: [String: String]) throws(ConfigurationError)
        -> RelayConfiguration {
        var given: [String: String] = [:]
        var rest = arguments[...]
        while let argument = rest.popFirst() {
            guard argument.hasPrefix("--") else { throw ConfigurationError("unexpected argument '\(argument.prefix(80))'") }
            var name = argument.dropFirst(2)
            var value: String?
            if let equals = name.firstIndex(of: "=") {
                value = String(name[name.index(after: equals)...])
                name = name[..<equals]
            }
            if name == "admin-token" {
                throw ConfigurationError("--admin-token is not accepted (the command line shows in ps): "
                                         + "set WIMZ_ADMIN_TOKEN or use --admin-token-file")
            }
            guard let option = all.first(where: { $0.flag.map { $0[...] == name } ?? false }) else {
                throw ConfigurationError("unknown option --\(name.prefix(80)) (wimz-relay serve --help lists them)")
            }
            guard let text = value ?? rest.popFirst() else { throw ConfigurationError("--\(name) needs a value") }
            given[option.env] = text
        }
        var environment = environment
        for (old, new) in renamed where (environment[new] ?? "").isEmpty { environment[new] = environment[old] }
        var config = RelayConfiguration.defaults
        for option in all {
            guard let text = given[option.env] ?? environment[option.env].flatMap({ $0.isEmpty ? nil : $0 }) else { continue }
            try option.apply(&config, text)
        }
        try config.validate()
        return config
    }
}

extension String {
    /// Without leading and trailing ASCII spaces, tabs and line ends (no Foundation).
    func trimmingASCIIWhitespace() -> String {
        let isSpace: (UInt8) -> Bool = { $0 == 0x20 || $0 == 0x09 || $0 == 0x0A || $0 == 0x0D }
        let bytes = Array(utf8)
        guard let first = bytes.firstIndex(where: { !isSpace($0) }), let last = bytes.lastIndex(where: { !isSpace($0) })
        else { return "" }
        return String(decoding: bytes[first...last], as: UTF8.self)
    }
}
