import ArgumentParser
import Logging
import RelayCore
import RelayCrypto
import RelayLogging
import RelayServer
import RelayStore

#if canImport(Glibc)
import Glibc
#endif

struct Serve: ParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Run the relay daemon.",
        discussion: """
            Every option can also be set through the environment variable named in its help;
            a flag wins over the environment. SIGTERM/SIGINT stop gracefully (close 1001).
            """)

    @OptionGroup var database: DatabaseOptions

    @Option(help: "host:port to listen on (env WIMZ_LISTEN, default 127.0.0.1:8080; port 0 picks one).")
    var listen: String?
    @Option(name: .customLong("admin-token-file"),
            help: "File holding the admin API's bearer token (env WIMZ_ADMIN_TOKEN_FILE; or the token itself in env WIMZ_ADMIN_TOKEN). At least 128 bits.")
    var adminTokenFile: String?
    /// Refused: a token on the command line shows in `ps` and shell history.
    @Option(name: .customLong("admin-token"), help: .hidden)
    var adminTokenOnCommandLine: String?
    @Option(name: .customLong("log-level"), help: "debug, info, warn or error (env WIMZ_LOG_LEVEL, default info).")
    var logLevel: String?
    @Option(name: .customLong("turn-urls"), help: "Comma-separated TURN URLs (env WIMZ_TURN_URLS).")
    var turnURLs: String?
    @Option(name: .customLong("turn-secret"), help: "Static TURN secret (env WIMZ_TURN_SECRET).")
    var turnSecret: String?
    @Option(name: .customLong("turn-realm"), help: "TURN realm (env WIMZ_TURN_REALM, default wimz).")
    var turnRealm: String?
    @Option(name: .customLong("turn-ttl"), help: "Default TURN credential TTL in seconds (env WIMZ_TURN_TTL, default 86400).")
    var turnTTL: Int?
    @Option(name: .customLong("turn-ttl-min"), help: "Smallest ?ttl= honoured (env WIMZ_TURN_TTL_MIN, default 300).")
    var turnTTLMin: Int?
    @Option(name: .customLong("turn-ttl-max"), help: "Largest ?ttl= honoured (env WIMZ_TURN_TTL_MAX, default 172800).")
    var turnTTLMax: Int?
    @Option(name: .customLong("turn-username-separator"), help: "Between expiry and user id (env WIMZ_TURN_USERNAME_SEPARATOR, default ':').")
    var turnSeparator: String?
    @Option(name: .customLong("turn-request-rate"), help: "Credential requests per second per token (env WIMZ_TURN_REQUEST_RATE, default 1, burst 10).")
    var turnRequestRate: Double?
    @Option(name: .customLong("trusted-proxies"), help: "Comma-separated proxy IPs whose X-Forwarded-For is believed (env WIMZ_TRUSTED_PROXIES).")
    var trustedProxies: String?
    @Option(name: .customLong("tls-cert"), help: "PEM certificate chain (env WIMZ_TLS_CERT).")
    var tlsCert: String?
    @Option(name: .customLong("tls-key"), help: "PEM private key (env WIMZ_TLS_KEY).")
    var tlsKey: String?
    @Option(name: .customLong("ping-interval"), help: "Seconds between pings (env WIMZ_PING_INTERVAL, default 20).")
    var pingInterval: Int?
    @Option(name: .customLong("upgrade-hold"), help: "Seconds after start that upgrades wait for the token mirror instead of getting 503 (env WIMZ_UPGRADE_HOLD, default 2).")
    var upgradeHold: Double?
    @Option(name: .customLong("max-message-bytes"), help: "Largest message, up to 1 MiB (env WIMZ_MAX_MESSAGE_BYTES, default 65536).")
    var maxMessageBytes: Int?
    @Option(name: .customLong("max-apps-per-device"), help: "App sockets per device (env WIMZ_MAX_APPS_PER_DEVICE, default 16).")
    var maxAppsPerDevice: Int?
    @Option(name: .customLong("app-rate-limit"), help: "App messages per second (env WIMZ_APP_RATE_LIMIT, default 20).")
    var appRateLimit: Double?
    @Option(name: .customLong("app-rate-burst"), help: "App message burst (env WIMZ_APP_RATE_BURST, default 40).")
    var appRateBurst: Double?
    @Option(name: .customLong("send-queue-messages"), help: "Per-socket send queue, messages (env WIMZ_SEND_QUEUE_MESSAGES, default 1024).")
    var sendQueueMessages: Int?
    @Option(name: .customLong("send-queue-bytes"), help: "Per-socket send queue, bytes (env WIMZ_SEND_QUEUE_BYTES, default 4194304).")
    var sendQueueBytes: Int?
    @Option(name: .customLong("event-loop"), help: "libev or poll (env WIMZ_EVENT_LOOP, default libev).")
    var eventLoop: RelayConfiguration.EventLoop?
    @Option(name: .customLong("spool-dir"), help: "Where audit events wait while the database is down (env WIMZ_SPOOL_DIR, default ./var/spool).")
    var spoolDir: String?

    @Option(name: .customLong("node-id"), help: "This node's id in the cluster (env WIMZ_NODE_ID, default hostname:port).")
    var nodeID: String?
    @Option(name: .customLong("node-address"), help: "Address shown to operators (env WIMZ_NODE_ADDRESS, default hostname:port).")
    var nodeAddress: String?
    @Option(name: .customLong("cluster-lease"), help: "Seconds a node's membership lasts without renewal (env WIMZ_CLUSTER_LEASE, default 5).")
    var clusterLease: Double?
    @Option(name: .customLong("move-damping"), help: "Seconds a device that moved away must stay away before it is claimed back (env WIMZ_MOVE_DAMPING, default 5).")
    var moveDamping: Double?
    @Option(name: .customLong("drain"), help: "Seconds /readyz says 503 before sockets are told 1012, with other nodes live (env WIMZ_DRAIN, default 3).")
    var drain: Double?
    @Option(name: .customLong("robot-http-max-body"), help: "Largest body to and from the robot's HTTP API through the relay, bytes (env WIMZ_ROBOT_HTTP_MAX_BODY, default 1048576).")
    var robotHTTPMaxBody: Int?
    @Option(name: .customLong("robot-http-timeout"), help: "Seconds the robot has to answer an HTTP request before 504 (env WIMZ_ROBOT_HTTP_TIMEOUT, default 15).")
    var robotHTTPTimeout: Double?
    @Option(name: .customLong("robot-http-rate"), help: "HTTP requests to the robot per second per app token (env WIMZ_ROBOT_HTTP_RATE, default 20, burst WIMZ_ROBOT_HTTP_BURST 40).")
    var robotHTTPRate: Double?
    @Option(name: .customLong("robot-http-burst"), help: "Burst of HTTP requests to the robot per app token (env WIMZ_ROBOT_HTTP_BURST, default 40).")
    var robotHTTPBurst: Double?
    @Option(name: .customLong("robot-http-max-pending"), help: "HTTP requests waiting for one robot at once; more get 429 (env WIMZ_ROBOT_HTTP_MAX_PENDING, default 64).")
    var robotHTTPMaxPending: Int?
    @Option(name: .customLong("recovery-messages"), help: "Missed-event recovery: messages kept per device (env WIMZ_RECOVERY_MESSAGES, default 256).")
    var recoveryMessages: Int?
    @Option(name: .customLong("recovery-seconds"), help: "Missed-event recovery: seconds a message is kept (env WIMZ_RECOVERY_SECONDS, default 120).")
    var recoverySeconds: Double?
    @Option(name: .customLong("pairing-code-ttl"), help: "Seconds a pairing code stays valid (env WIMZ_PAIRING_CODE_TTL, default 600).")
    var pairingCodeTTL: Int?
    @Option(name: .customLong("auth-failure-burst"), help: "Failed authentications per address in a burst before failing attempts get 429 (env WIMZ_AUTH_FAILURE_BURST, default 20).")
    var authFailureBurst: Double?
    @Option(name: .customLong("auth-failure-rate"), help: "Failed authentications per address refilled per second (env WIMZ_AUTH_FAILURE_RATE, default 1).")
    var authFailureRate: Double?
    @Option(name: .customLong("apns-key-file"), help: "APNs .p8 key from the Apple developer account (env WIMZ_APNS_KEY_FILE; without it no push is sent and push registrations answer 501). SIGHUP re-reads it.")
    var apnsKeyFile: String?
    @Option(name: .customLong("apns-key-id"), help: "The key's id, the JWT's kid (env WIMZ_APNS_KEY_ID).")
    var apnsKeyID: String?
    @Option(name: .customLong("apns-team-id"), help: "The Apple team id, the JWT's iss (env WIMZ_APNS_TEAM_ID).")
    var apnsTeamID: String?
    @Option(name: .customLong("apns-topic"), help: "The app's bundle id, apns-topic (env WIMZ_APNS_TOPIC).")
    var apnsTopic: String?
    @Option(name: .customLong("apns-url"), help: "APNs production base URL (env WIMZ_APNS_URL, default https://api.push.apple.com).")
    var apnsURL: String?
    @Option(name: .customLong("apns-sandbox-url"), help: "APNs sandbox base URL (env WIMZ_APNS_SANDBOX_URL, default https://api.sandbox.push.apple.com).")
    var apnsSandboxURL: String?
    @Option(name: .customLong("apns-ca-file"), help: "A CA certificate to trust for APNs besides the system's, for a stand-in (env WIMZ_APNS_CA_FILE).")
    var apnsCAFile: String?
    @Option(name: .customLong("push-interval"), help: "Seconds of one push window per registration and kind (env WIMZ_PUSH_INTERVAL, default 60).")
    var pushInterval: Double?
    @Option(name: .customLong("push-offline-after"), help: "Seconds a robot must be gone before robot_offline is pushed (env WIMZ_PUSH_OFFLINE_AFTER, default 300).")
    var pushOfflineAfter: Double?
    @Option(name: .customLong("stop-timeout"), help: "Seconds after SIGTERM before the process exits whatever it is doing (env WIMZ_STOP_TIMEOUT, default 20).")
    var stopTimeout: Double?

    func run() throws {
        let config = try makeConfiguration()
        RelayLogging.bootstrap(level: config.logLevel)
        let log = Logger(label: "wimz.serve")
        let migrator = try database.migrator()

        // Signals go to one watcher thread; block them before any other thread exists.
        let signals = SignalWatcher(signals: [SIGINT, SIGTERM, SIGHUP])
        let server: RelayServer
        do {
            server = try RelayServer(configuration: config, migrator: migrator)
        } catch {
            throw CLIError("\(error)")
        }
        let notifier = SystemdNotifier()
        server.onReady = { notifier.ready() }
        server.onStopping = { notifier.stopping() }
        server.onTick = { notifier.watchdogTick(nowNanos: $0) }
        let control = server.control
        let deadline = try setting(stopTimeout, "WIMZ_STOP_TIMEOUT", { Double($0) }) ?? 20
        signals.start { signal in
            if signal == SIGHUP {
                log.info("signal", metadata: ["signal": "SIGHUP"])
                control.reloadTLS()
            } else {
                log.info("signal", metadata: ["signal": "\(signal == SIGTERM ? "SIGTERM" : "SIGINT")"])
                control.requestStop()
                StopDeadline.arm(seconds: deadline)
            }
        }
        server.run()
    }

    /// A flag, else its environment variable, parsed; nil when neither is set.
    func setting<T>(_ flag: T?, _ env: String, _ parse: (String) -> T?) throws -> T? {
        if let flag { return flag }
        guard let text = Environment.value(env) else { return nil }
        guard let value = parse(text) else { throw CLIError("invalid value for \(env): '\(text.prefix(80))'") }
        return value
    }

    /// The admin token from WIMZ_ADMIN_TOKEN or a file (never argv), checked for strength.
    func adminToken() throws -> String? {
        if adminTokenOnCommandLine != nil {
            throw CLIError("--admin-token is not accepted (the command line shows in ps): set WIMZ_ADMIN_TOKEN or use --admin-token-file")
        }
        let token: String?
        if let path = try setting(adminTokenFile, "WIMZ_ADMIN_TOKEN_FILE", { $0 }) {
            guard let contents = FileContents.read(path) else { throw CLIError("cannot read the admin token file \(path)") }
            token = String(decoding: contents, as: UTF8.self).trimmingCharacters(in: .whitespacesAndNewlines)
        } else {
            token = Environment.value("WIMZ_ADMIN_TOKEN")
        }
        guard let token, !token.isEmpty else { return nil }
        if let problem = AdminTokenPolicy.problem(with: token) { throw CLIError(problem) }
        return token
    }

    /// The `WIMZ_APNS_*` and `WIMZ_PUSH_*` settings: a key needs its id, the team and the topic.
    func applyPush(to config: inout RelayConfiguration) throws {
        config.apnsKeyFile = try setting(apnsKeyFile, "WIMZ_APNS_KEY_FILE", { $0 })
        config.apnsKeyID = try setting(apnsKeyID, "WIMZ_APNS_KEY_ID", { $0 })
        config.apnsTeamID = try setting(apnsTeamID, "WIMZ_APNS_TEAM_ID", { $0 })
        config.apnsTopic = try setting(apnsTopic, "WIMZ_APNS_TOPIC", { $0 })
        config.apnsURL = try setting(apnsURL, "WIMZ_APNS_URL", { $0 }) ?? config.apnsURL
        config.apnsSandboxURL = try setting(apnsSandboxURL, "WIMZ_APNS_SANDBOX_URL", { $0 }) ?? config.apnsSandboxURL
        config.apnsCAFile = try setting(apnsCAFile, "WIMZ_APNS_CA_FILE", { $0 })
        config.pushIntervalSeconds = try setting(pushInterval, "WIMZ_PUSH_INTERVAL", { Double($0) }) ?? config.pushIntervalSeconds
        config.pushOfflineAfterSeconds = try setting(pushOfflineAfter, "WIMZ_PUSH_OFFLINE_AFTER", { Double($0) })
            ?? config.pushOfflineAfterSeconds
        guard config.pushIntervalSeconds > 0, config.pushOfflineAfterSeconds >= 0 else {
            throw CLIError("push: the interval must be positive and offline-after not negative")
        }
        guard let keyFile = config.apnsKeyFile else { return }
        guard config.apnsKeyID != nil, config.apnsTeamID != nil, config.apnsTopic != nil else {
            throw CLIError("WIMZ_APNS_KEY_FILE needs WIMZ_APNS_KEY_ID, WIMZ_APNS_TEAM_ID and WIMZ_APNS_TOPIC")
        }
        guard let pem = FileContents.read(keyFile) else { throw CLIError("cannot read the APNs key file \(keyFile)") }
        do { _ = try ES256Signer(pem: pem) } catch { throw CLIError("APNs key \(keyFile): \(error)") }
    }

    func makeConfiguration() throws -> RelayConfiguration {
        var config = RelayConfiguration(databaseURL: try database.resolvedURL(),
                                        migrationsDirectory: try MigrationsLocator.find(explicit: database.migrationsDir ?? Environment.value("WIMZ_MIGRATIONS_DIR")))
        if let text = try setting(listen, "WIMZ_LISTEN", { $0 }) {
            guard let (host, port) = RelayConfiguration.parseListen(text) else {
                throw CLIError("invalid listen address '\(text)': expected host:port")
            }
            config.listenHost = host
            config.listenPort = port
        }
        config.adminToken = try adminToken()
        if let text = try setting(logLevel, "WIMZ_LOG_LEVEL", { $0 }) {
            guard let level = LogLevel(name: text) else { throw CLIError("invalid log level '\(text)': use debug, info, warn or error") }
            config.logLevel = level
        }
        if let urls = try setting(turnURLs, "WIMZ_TURN_URLS", { $0 }) {
            config.turnURLs = urls.split(separator: ",").map { String($0).trimmingCharacters(in: .whitespaces) }.filter { !$0.isEmpty }
        }
        config.turnStaticSecret = try setting(turnSecret, "WIMZ_TURN_SECRET", { $0 })
        config.turnRealm = try setting(turnRealm, "WIMZ_TURN_REALM", { $0 }) ?? config.turnRealm
        config.turnTTL = try setting(turnTTL, "WIMZ_TURN_TTL", { Int($0) }) ?? config.turnTTL
        config.turnTTLMin = try setting(turnTTLMin, "WIMZ_TURN_TTL_MIN", { Int($0) }) ?? config.turnTTLMin
        config.turnTTLMax = try setting(turnTTLMax, "WIMZ_TURN_TTL_MAX", { Int($0) }) ?? config.turnTTLMax
        config.turnUsernameSeparator = try setting(turnSeparator, "WIMZ_TURN_USERNAME_SEPARATOR", { $0 }) ?? config.turnUsernameSeparator
        config.turnRequestRate = try setting(turnRequestRate, "WIMZ_TURN_REQUEST_RATE", { Double($0) }) ?? config.turnRequestRate
        guard config.turnTTLMin >= 1, config.turnTTLMin <= config.turnTTLMax else {
            throw CLIError("TURN TTL range must satisfy 1 <= min <= max")
        }
        guard !config.turnUsernameSeparator.isEmpty,
              config.turnUsernameSeparator.allSatisfy({ !$0.isWhitespace && $0 != "\"" && !$0.isLetter && !$0.isNumber })
        else { throw CLIError("TURN username separator must be punctuation without spaces or quotes") }
        if let proxies = try setting(trustedProxies, "WIMZ_TRUSTED_PROXIES", { $0 }) {
            config.trustedProxies = Set(proxies.split(separator: ",").map { $0.trimmingCharacters(in: .whitespaces) }.filter { !$0.isEmpty })
        }
        config.tlsCertificatePath = try setting(tlsCert, "WIMZ_TLS_CERT", { $0 })
        config.tlsKeyPath = try setting(tlsKey, "WIMZ_TLS_KEY", { $0 })
        config.pingIntervalSeconds = try setting(pingInterval, "WIMZ_PING_INTERVAL", { Int($0) }) ?? config.pingIntervalSeconds
        config.upgradeHoldSeconds = try setting(upgradeHold, "WIMZ_UPGRADE_HOLD", { Double($0) }) ?? config.upgradeHoldSeconds
        guard (0...60).contains(config.upgradeHoldSeconds) else { throw CLIError("upgrade hold must be 0 to 60 seconds") }
        config.maxMessageBytes = try setting(maxMessageBytes, "WIMZ_MAX_MESSAGE_BYTES", { Int($0) }) ?? config.maxMessageBytes
        config.maxAppsPerDevice = try setting(maxAppsPerDevice, "WIMZ_MAX_APPS_PER_DEVICE", { Int($0) }) ?? config.maxAppsPerDevice
        config.appRateLimitPerSecond = try setting(appRateLimit, "WIMZ_APP_RATE_LIMIT", { Double($0) }) ?? config.appRateLimitPerSecond
        config.appRateLimitBurst = try setting(appRateBurst, "WIMZ_APP_RATE_BURST", { Double($0) }) ?? config.appRateLimitBurst
        config.sendQueueMaxMessages = try setting(sendQueueMessages, "WIMZ_SEND_QUEUE_MESSAGES", { Int($0) }) ?? config.sendQueueMaxMessages
        config.sendQueueMaxBytes = try setting(sendQueueBytes, "WIMZ_SEND_QUEUE_BYTES", { Int($0) }) ?? config.sendQueueMaxBytes
        if let loop = try setting(eventLoop, "WIMZ_EVENT_LOOP", { RelayConfiguration.EventLoop(rawValue: $0) }) {
            config.eventLoop = loop
        }
        config.spoolDirectory = try setting(spoolDir, "WIMZ_SPOOL_DIR", { $0 }) ?? config.spoolDirectory
        config.nodeID = try setting(nodeID, "WIMZ_NODE_ID", { NodeName.isValid($0) ? $0 : nil })
        config.nodeAddress = try setting(nodeAddress, "WIMZ_NODE_ADDRESS", { NodeName.isValid($0) ? $0 : nil })
        config.clusterLeaseSeconds = try setting(clusterLease, "WIMZ_CLUSTER_LEASE", { Double($0) }) ?? config.clusterLeaseSeconds
        config.clusterMoveDampingSeconds = try setting(moveDamping, "WIMZ_MOVE_DAMPING", { Double($0) }) ?? config.clusterMoveDampingSeconds
        config.drainSeconds = try setting(drain, "WIMZ_DRAIN", { Double($0) }) ?? config.drainSeconds
        config.robotHTTPMaxBody = try setting(robotHTTPMaxBody, "WIMZ_ROBOT_HTTP_MAX_BODY", { Int($0) }) ?? config.robotHTTPMaxBody
        config.robotHTTPTimeoutSeconds = try setting(robotHTTPTimeout, "WIMZ_ROBOT_HTTP_TIMEOUT", { Double($0) }) ?? config.robotHTTPTimeoutSeconds
        config.robotHTTPRate = try setting(robotHTTPRate, "WIMZ_ROBOT_HTTP_RATE", { Double($0) }) ?? config.robotHTTPRate
        config.robotHTTPBurst = try setting(robotHTTPBurst, "WIMZ_ROBOT_HTTP_BURST", { Double($0) }) ?? config.robotHTTPBurst
        config.robotHTTPMaxPending = try setting(robotHTTPMaxPending, "WIMZ_ROBOT_HTTP_MAX_PENDING", { Int($0) }) ?? config.robotHTTPMaxPending
        guard (0...RelayConfiguration.robotHTTPMaxBodyLimit).contains(config.robotHTTPMaxBody),
              config.robotHTTPTimeoutSeconds > 0, config.robotHTTPTimeoutSeconds <= 300,
              config.robotHTTPRate > 0, config.robotHTTPBurst >= 1, config.robotHTTPMaxPending >= 1 else {
            throw CLIError("robot HTTP: body 0…\(RelayConfiguration.robotHTTPMaxBodyLimit) bytes, timeout 0…300 s, "
                           + "rate positive, burst and pending at least 1")
        }
        config.recoveryMessages = try setting(recoveryMessages, "WIMZ_RECOVERY_MESSAGES", { Int($0) }) ?? config.recoveryMessages
        config.recoverySeconds = try setting(recoverySeconds, "WIMZ_RECOVERY_SECONDS", { Double($0) }) ?? config.recoverySeconds
        guard (1...65_536).contains(config.recoveryMessages), config.recoverySeconds > 0, config.recoverySeconds <= 3600 else {
            throw CLIError("recovery: 1…65536 messages and 0…3600 seconds per device")
        }
        config.pairingCodeSeconds = try setting(pairingCodeTTL, "WIMZ_PAIRING_CODE_TTL", { Int($0) }) ?? config.pairingCodeSeconds
        guard (30...86_400).contains(config.pairingCodeSeconds) else { throw CLIError("pairing code TTL must be 30…86400 seconds") }
        config.authFailureBurst = try setting(authFailureBurst, "WIMZ_AUTH_FAILURE_BURST", { Double($0) }) ?? config.authFailureBurst
        config.authFailureRate = try setting(authFailureRate, "WIMZ_AUTH_FAILURE_RATE", { Double($0) }) ?? config.authFailureRate
        guard config.authFailureBurst >= 1, config.authFailureRate > 0 else {
            throw CLIError("auth failure limit: burst at least 1, rate positive")
        }
        try applyPush(to: &config)
        guard config.clusterLeaseSeconds >= 2, config.clusterMoveDampingSeconds >= 0, config.drainSeconds >= 0 else {
            throw CLIError("cluster lease must be at least 2 s; damping and drain not negative")
        }

        guard (1...RelayConfiguration.maxMessageBytesLimit).contains(config.maxMessageBytes) else {
            throw CLIError("max message size must be 1…\(RelayConfiguration.maxMessageBytesLimit) bytes")
        }
        guard config.pingIntervalSeconds >= 1 else { throw CLIError("ping interval must be at least 1 second") }
        guard config.maxAppsPerDevice >= 1, config.sendQueueMaxMessages >= 1, config.sendQueueMaxBytes >= 1024 else {
            throw CLIError("app cap and send queue limits must be positive (queue bytes at least 1024)")
        }
        guard config.appRateLimitPerSecond > 0, config.appRateLimitBurst >= 1 else {
            throw CLIError("app rate limit must be positive and burst at least 1")
        }
        if (config.tlsCertificatePath == nil) != (config.tlsKeyPath == nil) {
            throw CLIError("TLS needs both a certificate (WIMZ_TLS_CERT) and a key (WIMZ_TLS_KEY)")
        }
        return config
    }
}

extension RelayConfiguration.EventLoop: ExpressibleByArgument {}
