import WimzProtocol

/// Everything `wimz-relay serve` can be told, with the defaults in one place. How each field is
/// set (its `WIMZ_*` variable and flag) and the values it may take are rows of ``ServeOptions``;
/// `validate()` checks a configuration however it was made.
public struct RelayConfiguration: Sendable {
    /// libpq conninfo or `postgresql://` URL (`WIMZ_DATABASE_URL`).
    public var databaseURL: String
    /// Listen address (`WIMZ_LISTEN`, default `127.0.0.1:8080`). Port 0 picks a free port.
    public var listenHost = "127.0.0.1"
    public var listenPort = 8080
    /// Bearer token guarding the admin API (`WIMZ_ADMIN_TOKEN`); nil disables the admin API.
    public var adminToken: String?
    /// Directory holding the numbered SQL migrations (`WIMZ_MIGRATIONS_DIR`).
    public var migrationsDirectory: String
    public var logLevel: LogLevel = .info
    /// libev (epoll, scales with idle sockets) or lws's own poll() loop (`WIMZ_EVENT_LOOP`).
    public var eventLoop: EventLoop = .libev
    /// Descriptors the process may hold, sockets included (`WIMZ_MAX_DESCRIPTORS`): its
    /// RLIMIT_NOFILE and the size of lws's descriptor table. lws 4.1.6 as Debian builds it
    /// (with its debug checks) scans that whole table at every close, so the table is sized to
    /// a node's peak rather than to whatever limit the process was given.
    public var maxDescriptors = 65_536

    public enum EventLoop: String, Sendable, CaseIterable {
        case libev, poll
    }

    // TURN (docs/protocol.md "TURN credentials").
    public var turnURLs: [String] = []
    public var turnStaticSecret: String?
    public var turnRealm = "wimz"
    public var turnTTL = 86_400
    public var turnTTLMin = 300
    public var turnTTLMax = 172_800
    public var turnUsernameSeparator = ":"
    /// Credential requests per token: sustained rate per second and burst.
    public var turnRequestRate = 1.0
    public var turnRequestBurst = 10.0
    /// coturn management CLIs where removed members' sessions are cut (docs/protocol.md v1.3); empty:
    /// the relay only stops issuing.
    public var turnAdminServers: [TurnAdminServer] = []
    public var turnAdminPassword: String?
    /// coturn's `max-allocate-lifetime`: how long after its credential expired an allocation may live.
    public var turnMaxAllocationLifetime = 3600

    /// Peers whose `X-Forwarded-For` is believed (the TLS proxy in front); exact IP addresses.
    public var trustedProxies: Set<String> = []

    // TLS (served by libwebsockets/OpenSSL when both are set).
    public var tlsCertificatePath: String?
    public var tlsKeyPath: String?

    // WebSocket limits (docs/protocol.md "Keepalive, limits and close codes").
    public var pingIntervalSeconds = WimzProtocol.defaultPingIntervalSeconds
    public var maxMessageBytes = WimzProtocol.defaultMaxMessageBytes
    public var maxAppsPerDevice = 16
    public var appRateLimitPerSecond = 20.0
    public var appRateLimitBurst = 40.0
    public var sendQueueMaxMessages = 1024
    public var sendQueueMaxBytes = 4 * 1024 * 1024
    /// TCP on the client sockets (docs/operations.md "Cellular links"): the longest wait between
    /// retransmissions (Linux's TCP_RTO_MAX_MS; the kernel's own is 120 s), how long sent data may
    /// go unacknowledged before the socket is dropped (TCP_USER_TIMEOUT; 0: the kernel's retries),
    /// and the quiet before TCP keepalive probes (0: none).
    public var tcpRetransmitCapSeconds = 2.0
    public var tcpUserTimeoutSeconds = 2 * WimzProtocol.defaultPingIntervalSeconds
    public var tcpKeepaliveSeconds = WimzProtocol.defaultPingIntervalSeconds
    /// Events remembered per device and replayed to apps that connect later.
    public var replayEvents: Set<String> = WimzProtocol.replayedEvents

    // HTTP to the robot (docs/protocol.md v1.1 "The robot's API through the relay").
    /// Largest request and response body (`WIMZ_ROBOT_HTTP_MAX_BODY`, default 1 MiB).
    public var robotHTTPMaxBody = WimzProtocol.defaultRobotHTTPMaxBody
    /// Seconds the robot has to answer completely before the app gets 504 (`WIMZ_ROBOT_HTTP_TIMEOUT`).
    public var robotHTTPTimeoutSeconds = 15.0
    /// Requests per second and burst per app token (`WIMZ_ROBOT_HTTP_RATE`, `WIMZ_ROBOT_HTTP_BURST`).
    public var robotHTTPRate = 20.0
    public var robotHTTPBurst = 40.0
    /// Requests waiting for one robot at once (`WIMZ_ROBOT_HTTP_MAX_PENDING`); more: 429.
    public var robotHTTPMaxPending = 64

    /// Missed-event recovery: messages and seconds kept per device (`WIMZ_RECOVERY_MESSAGES`,
    /// `WIMZ_RECOVERY_SECONDS`; docs/protocol.md v1.1 "Recovering missed events").
    public var recoveryMessages = WimzProtocol.defaultRecoveryMessages
    public var recoverySeconds = 120.0
    /// Bytes the missed-event history of every device may hold together on this node
    /// (`WIMZ_RECOVERY_MEMORY`, default 512 MiB: a quarter of a 2 GiB node); past it the least
    /// recently resumed devices lose their oldest messages.
    public var recoveryMemoryBytes = 512 << 20
    /// Seconds a pairing code stays valid (`WIMZ_PAIRING_CODE_TTL`), unless its minter asks for
    /// another lifetime within `pairingCodeRange`.
    public var pairingCodeSeconds = 600
    public static let pairingCodeRange = SettingRange.from(30, to: 86_400)
    /// Failed authentications one address may make in a burst, and how many it gets back per
    /// second (`WIMZ_AUTH_FAILURE_BURST`, `WIMZ_AUTH_FAILURE_RATE`); past them its failing
    /// attempts get 429 (valid credentials still pass).
    public var authFailureBurst = 20.0
    public var authFailureRate = 1.0

    /// Push through APNs (docs/protocol.md v1.2): the `.p8` key (`WIMZ_APNS_KEY_FILE`; nil: no push,
    /// registrations answer 501), its key id, the team id and the app's bundle id (topic).
    public var apnsKeyFile: String?
    public var apnsKeyID: String?
    public var apnsTeamID: String?
    public var apnsTopic: String?
    public var apnsURL = "https://api.push.apple.com"
    public var apnsSandboxURL = "https://api.sandbox.push.apple.com"
    /// A CA certificate to trust besides the system's (`WIMZ_APNS_CA_FILE`: a stand-in in tests).
    public var apnsCAFile: String?
    /// One push per registration and kind opens a window this long (`WIMZ_PUSH_INTERVAL`).
    public var pushIntervalSeconds = 60.0
    /// `robot_offline` once the robot has been gone this long (`WIMZ_PUSH_OFFLINE_AFTER`).
    public var pushOfflineAfterSeconds = 300.0
    /// Live Activities (v1.4): a request's `stale-date` is its timestamp plus this; a retry
    /// older than this is dropped (`WIMZ_LIVE_ACTIVITY_STALE_AFTER`).
    public var liveActivityStaleAfter = 120
    /// Priority-10 updates per activity in any hour; further ones go at 5 (`WIMZ_LIVE_ACTIVITY_ALERTS_PER_HOUR`).
    public var liveActivityAlertsPerHour = 30
    /// At most one coalesced priority-5 update per activity this often, seconds (`WIMZ_LIVE_ACTIVITY_INTERVAL`).
    public var liveActivityIntervalSeconds = 2.0
    /// An ended activity leaves the lock screen this many seconds after its end (`WIMZ_LIVE_ACTIVITY_DISMISS_AFTER`).
    public var liveActivityDismissAfter = 900
    /// Whether pushes can be sent (a key is configured).
    public var pushEnabled: Bool { apnsKeyFile != nil }

    /// How long a request or upgrade waits for its token to be read from the store before it gets
    /// 503 (`WIMZ_CREDENTIAL_HOLD`; the store unreachable).
    public var credentialHoldSeconds = 2.0
    /// Tokens kept in memory (`WIMZ_CREDENTIAL_CACHE`): more than the node's sockets, or
    /// reconnects read tokens from the store again.
    public var credentialCacheSize = 200_000
    /// How long a graceful stop waits for peers to acknowledge the 1001 close.
    public var shutdownGraceSeconds = 2
    /// After SIGTERM, the process exits this much later whatever it is doing (`WIMZ_STOP_TIMEOUT`).
    public var stopTimeoutSeconds = 20.0
    // Several nodes (docs/cluster.md).
    /// This node's id in `relay_nodes` (`WIMZ_NODE_ID`; default `hostname:port`, stable across restarts).
    public var nodeID: String?
    /// The address other nodes and operators see (`WIMZ_NODE_ADDRESS`; default `hostname:port`).
    public var nodeAddress: String?
    /// How long a node's membership lease lasts without renewal (renewed every second).
    public var clusterLeaseSeconds = 5.0
    /// A device that returns to this node this soon after moving away is claimed only when
    /// the window has passed (a flapping balancer moves each device at most once per window).
    public var clusterMoveDampingSeconds = 5.0
    /// On SIGTERM with other live nodes: how long `/readyz` says 503 before sockets are told
    /// 1012 (the balancer's time to stop choosing this node: HAProxy `inter` × `fall`).
    public var drainSeconds = 3.0

    // Retention (docs/operations.md "Retention"): days a row of each growing table is kept; 0 keeps it.
    /// Audit log rows, by their time (`WIMZ_AUDIT_RETENTION_DAYS`).
    public var auditRetentionDays = 365
    /// TURN issuances, once expired (`WIMZ_TURN_ISSUANCE_RETENTION_DAYS`).
    public var turnIssuanceRetentionDays = 90
    /// Pairing codes and invitations, once expired (`WIMZ_PAIRING_RETENTION_DAYS`).
    public var pairingRetentionDays = 30
    /// Removals' TURN cuts, once done (`WIMZ_TURN_CUT_RETENTION_DAYS`).
    public var turnCutRetentionDays = 30
    /// Seconds between pruning rounds (`WIMZ_RETENTION_INTERVAL`).
    public var retentionIntervalSeconds = 300.0
    /// A device's timeline retention unless its owner chose another (`WIMZ_TIMELINE_DAYS`, v1.6).
    public var timelineDays = 30
    /// The longest retention an owner may choose (`WIMZ_TIMELINE_MAX_DAYS`).
    public var timelineMaxDays = 365

    /// Where audit events go when the database is unreachable at shutdown (`WIMZ_SPOOL_DIR`).
    public var spoolDirectory = "./var/spool"

    public init(databaseURL: String, migrationsDirectory: String) {
        self.databaseURL = databaseURL
        self.migrationsDirectory = migrationsDirectory
    }

    /// Every default; no database and no migrations directory (found beside the binary).
    public static let defaults = RelayConfiguration(databaseURL: "", migrationsDirectory: "")

    /// Largest message the contract allows an operator to configure.
    public static let maxMessageBytesLimit = 1 << 20
    /// Largest robot HTTP body an operator may configure (the request crosses the robot's
    /// socket as one base64 frame of about 4/3 of it).
    public static let robotHTTPMaxBodyLimit = 8 << 20

    /// Parses `host:port` (IPv6 as `[::1]:8080`). Nil for anything else.
    public static func parseListen(_ text: String) -> (host: String, port: Int)? {
        let host: Substring
        let portText: Substring
        if text.hasPrefix("[") {
            guard let close = text.firstIndex(of: "]") else { return nil }
            host = text[text.index(after: text.startIndex)..<close]
            let rest = text[text.index(after: close)...]
            guard rest.hasPrefix(":") else { return nil }
            portText = rest.dropFirst()
        } else {
            guard let colon = text.lastIndex(of: ":") else { return nil }
            host = text[..<colon]
            portText = text[text.index(after: colon)...]
        }
        guard !host.isEmpty, let port = Int(portText), (0...65535).contains(port) else { return nil }
        return (String(host), port)
    }
}
