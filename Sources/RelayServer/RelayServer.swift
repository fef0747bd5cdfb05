import CLibWebSockets
import Logging
import RelayCore
import RelayCrypto
import RelayStore
import RelayWorkers
import Synchronization

#if canImport(Glibc)
import Glibc
#endif

/// What other threads tell the service thread.
enum ServiceEvent: Sendable {
    case store(StoreEvent)
    case stop
    /// Re-read the TLS certificate and key (SIGHUP); live connections keep their sessions.
    case reloadTLS
    /// The database worker finished admin request `id`.
    case adminDone(UInt64, HTTPResponse)
    case cluster(ClusterEvent)
}

/// Wakes the service thread from any thread. `lws_cancel_service` is the one thread-safe
/// lws call; the context pointer is set once, before any other thread can post.
final class ServiceWaker: @unchecked Sendable {
    // Other threads wake the loop while the service thread may be tearing the context down:
    // the pointer is read and cleared under one lock, so no wake reaches a destroyed context.
    private let context = Locked<OpaquePointer?>(nil)
    func attach(_ context: OpaquePointer) { self.context.withLock { $0 = context } }
    func detach() { context.withLock { $0 = nil } }
    func wake() { context.withLock { if let context = $0 { lws_cancel_service(context) } } }
}

/// Thread-safe requests to a running `RelayServer`.
public struct RelayControl: Sendable {
    let mailbox: Mailbox<ServiceEvent>

    /// Starts a graceful stop.
    public func requestStop() { mailbox.post(.stop) }

    /// Reloads the TLS certificate and key from their files.
    public func reloadTLS() { mailbox.post(.reloadTLS) }
}

/// Errors starting the server.
public struct ServerError: Error, CustomStringConvertible {
    public var description: String
}

/// The daemon: one libwebsockets context whose single service thread owns every socket and
/// all relay state. Other threads (store monitor, signal watcher) talk to it only through
/// its mailbox.
public final class RelayServer {
    public let configuration: RelayConfiguration
    let log = Logger(label: "wimz.relay")
    let mailbox: Mailbox<ServiceEvent>
    private let waker = ServiceWaker()
    private var context: OpaquePointer?
    private let protocols: UnsafeMutablePointer<lws_protocols>
    private let protocolName: UnsafeMutablePointer<CChar>
    private let gateProtocolName: UnsafeMutablePointer<CChar>
    private let listenHost: UnsafeMutablePointer<CChar>
    /// The plain-HTTP front door (nil when lws serves TLS itself and listens).
    private(set) var gate: HTTPGate?
    /// C strings lws keeps pointers to for the context's lifetime (TLS paths, ALPN).
    private var retainedCStrings: [UnsafeMutablePointer<CChar>] = []
    private let monitor: StoreMonitor

    /// The port actually bound (differs from the configuration when it asked for 0).
    public private(set) var boundPort = 0

    // Service-thread state: everything below is touched only by the lws service thread.
    /// Latest store state, as reported by the monitor.
    private(set) var storeHealth = StoreHealth(state: .unavailable, reason: "not checked yet")
    private(set) var finished = false
    private var announcedReady = false
    let hub: DeviceHub
    let credentials = CredentialTable()
    let authFailures = AuthFailureLimiter()
    let auditWriter: AuditWriter
    let turn: TurnService
    let writer: FrameWriter
    /// Which sessions need a look, and when: ticked every 10 ms (O(due) per tick).
    let scheduler = SessionScheduler(now: MonotonicClock.nanoseconds(), slotWidth: UInt64(RelayServer.wheelInterval) * 1000,
                                     slotCount: 2048)
    /// Microseconds between turns of the session wheel.
    static let wheelInterval: Int64 = 10_000
    let keepalive: KeepalivePolicy
    var counters = RelayCounters()
    /// Membership, presence and claims (RelayServer+Cluster.swift).
    var cluster: ClusterAgent!
    var clusterBook: ClusterBook
    var clusterLiveNodes = 1
    var clusterSplitDevices = 0
    /// Set by SIGTERM while the balancer is given time to stop choosing this node.
    var drainUntil: UInt64?
    /// The grant decided in CONFIRM_UPGRADE, consumed by the ESTABLISHED that follows it.
    var pendingGrant: (wsi: OpaquePointer, grant: UpgradeGrant)?
    var nextSessionID: UInt64 = 0
    var openConnections = 0
    var stopping = false
    var stopDeadline: UInt64?
    var closingStartedAt: UInt64?
    /// Closing sockets: let out a few per wheel tick, cut off if their close does not get out.
    let closeWatch = CloseWatch()
    let adminWorker: DatabaseWorker
    /// Admin requests in flight, by id and by their connection.
    var exchanges: [UInt64: HTTPExchange] = [:]
    var exchangeByWsi: [OpaquePointer: UInt64] = [:]
    var nextExchangeID: UInt64 = 0
    /// HTTP requests waiting for a robot's answer (RelayServer+RobotHTTP.swift).
    let robotExchanges: RobotHTTPExchanges<RobotHTTPClient>
    /// Per app token: HTTP requests to its robot.
    var robotHTTPLimiter: KeyedRateLimiter
    /// Per robot token: pairing calls (mint a code, list and revoke app tokens).
    var pairingLimiter = KeyedRateLimiter(rate: 2, burst: 10)
    /// When each not-yet-established connection was accepted (handshake latency metric).
    var acceptedAt: [OpaquePointer: UInt64] = [:]
    /// The 1 s tick, the session wheel (10 ms) and the cluster batches (100 ms).
    private var timers: [LWSTimer] = []
    private let retryPolicy: UnsafeMutablePointer<lws_retry_bo_t>

    /// Called on the service thread once the relay listens and the store is ready (systemd READY=1).
    public var onReady: (() -> Void)?
    /// Called on the service thread when a graceful stop begins (systemd STOPPING=1).
    public var onStopping: (() -> Void)?
    /// Called on the service thread once a second with the monotonic time (systemd watchdog):
    /// if the loop stalls, the pings stop.
    public var onTick: ((UInt64) -> Void)?

    public init(configuration: RelayConfiguration, migrator: Migrator) throws {
        self.configuration = configuration
        let waker = self.waker
        mailbox = Mailbox(wake: { waker.wake() })
        let mailbox = self.mailbox
        monitor = StoreMonitor(conninfo: configuration.databaseURL, migrator: migrator, turnRealm: configuration.turnRealm) {
            mailbox.post(.store($0))
        }
        turn = TurnService(configuration: configuration)
        keepalive = KeepalivePolicy(interval: UInt64(configuration.pingIntervalSeconds) * 1_000_000_000)
        adminWorker = DatabaseWorker(conninfo: configuration.databaseURL)
        auditWriter = AuditWriter(conninfo: configuration.databaseURL, spoolDirectory: configuration.spoolDirectory)
        var limits = DeviceHub.Limits()
        limits.maxAppsPerDevice = configuration.maxAppsPerDevice
        limits.appRate = configuration.appRateLimitPerSecond
        limits.appBurst = configuration.appRateLimitBurst
        limits.replayEvents = configuration.replayEvents
        limits.history.maxMessages = configuration.recoveryMessages
        limits.history.maxAge = UInt64(configuration.recoverySeconds * 1e9)
        hub = DeviceHub(limits: limits)
        var exchangeLimits = RobotHTTPExchanges<RobotHTTPClient>.Limits()
        exchangeLimits.timeout = UInt64(configuration.robotHTTPTimeoutSeconds * 1e9)
        exchangeLimits.maxResponseBody = configuration.robotHTTPMaxBody
        exchangeLimits.maxPerDevice = configuration.robotHTTPMaxPending
        robotExchanges = RobotHTTPExchanges(limits: exchangeLimits)
        robotHTTPLimiter = KeyedRateLimiter(rate: configuration.robotHTTPRate, burst: configuration.robotHTTPBurst)
        clusterBook = ClusterBook(dampingWindow: UInt64(configuration.clusterMoveDampingSeconds * 1e9))
        // One write buffer holds any single frame: the largest message, or an `http_request`
        // carrying the largest robot HTTP body (base64: 4/3 of it, plus the head's headers).
        writer = FrameWriter(capacity: max(64 * 1024, configuration.maxMessageBytes + 16,
                                           (configuration.robotHTTPMaxBody + 2) / 3 * 4 + 32 * 1024))
        // lws's own keepalive keeps every socket's timer in one sorted list (O(n) per PONG);
        // the relay pings from its own session wheel instead, so both lws timers are off.
        retryPolicy = .allocate(capacity: 1)
        retryPolicy.initialize(to: lws_retry_bo_t())

        let servesTLS = configuration.tlsCertificatePath != nil && configuration.tlsKeyPath != nil
        if !servesTLS {
            gate = try HTTPGate(host: configuration.listenHost, port: configuration.listenPort)
        }
        protocolName = strdup("wimz-relay")
        gateProtocolName = strdup(HTTPGate.protocolName)
        listenHost = strdup(configuration.listenHost)
        // [0] HTTP and WebSocket (the vhost's default), [1] the gate's raw descriptors, [2] end.
        protocols = .allocate(capacity: 3)
        protocols.initialize(repeating: lws_protocols(), count: 3)
        protocols[0].name = UnsafePointer(protocolName)
        protocols[0].callback = relayCallback
        protocols[0].per_session_data_size = MemoryLayout<UnsafeMutableRawPointer>.size
        protocols[0].rx_buffer_size = 16 * 1024
        protocols[0].tx_packet_size = 64 * 1024
        protocols[1].name = UnsafePointer(gateProtocolName)
        protocols[1].callback = relayCallback

        LWSLogBridge.install(level: configuration.logLevel)

        var info = lws_context_creation_info()
        // With the gate, lws does not listen: it serves the connections the gate hands over.
        info.port = gate == nil ? Int32(configuration.listenPort) : -2  // CONTEXT_PORT_NO_LISTEN_SERVER
        // Room for the largest head the gate lets through (it forwards only a few headers).
        info.max_http_header_data = UInt16(HTTPRequestHead.Limits().headerBytes + 1024)
        info.iface = UnsafePointer(listenHost)
        info.protocols = UnsafePointer(protocols)
        info.user = Unmanaged.passUnretained(self).toOpaque()
        info.pt_serv_buf_size = 16 * 1024
        info.fd_limit_per_thread = UInt32(FileDescriptorLimit.raise())
        info.options = CLibWebSockets_OPTION_DISABLE_IPV6() | CLibWebSockets_OPTION_VALIDATE_UTF8()
        if configuration.listenHost.contains(":") { info.options &= ~CLibWebSockets_OPTION_DISABLE_IPV6() }
        // libev's epoll costs O(active sockets) per wakeup; lws's poll() loop costs O(all sockets).
        if configuration.eventLoop == .libev { info.options |= CLibWebSockets_OPTION_LIBEV() }
        // Keep lws's signal handling out of the way: signals are taken by the executable.
        info.vhost_name = UnsafePointer(protocolName)
        info.retry_and_idle_policy = UnsafePointer(retryPolicy)
        if let cert = configuration.tlsCertificatePath, let key = configuration.tlsKeyPath {
            // TLS 1.2+ only; ALPN pinned to HTTP/1.1 (WebSockets here are RFC 6455 over HTTP/1.1).
            let c = strdup(cert)!, k = strdup(key)!, alpn = strdup("http/1.1")!
            retainedCStrings += [c, k, alpn]
            info.options |= CLibWebSockets_OPTION_DO_SSL_GLOBAL_INIT()
            info.ssl_cert_filepath = UnsafePointer(c)
            info.ssl_private_key_filepath = UnsafePointer(k)
            info.ssl_options_set = CLibWebSockets_TLS_NO_LEGACY_PROTOCOLS()
            info.alpn = UnsafePointer(alpn)
        }
        info.timeout_secs = 10

        guard let context = lws_create_context(&info) else {
            retainedCStrings.forEach { free($0) }
            retryPolicy.deallocate()
            protocols.deallocate()
            free(protocolName)
            free(gateProtocolName)
            free(listenHost)
            throw ServerError(description: "cannot listen on \(configuration.listenHost):\(configuration.listenPort) "
                + "(address in use, not an address of this host"
                + (configuration.eventLoop == .libev ? ", or the libev plugin libwebsockets-evlib-ev is missing)" : ")"))
        }
        self.context = context
        waker.attach(context)
        if let vhost = lws_get_vhost_by_name(context, protocolName) {
            if let gate {
                try gate.attach(to: vhost)
                boundPort = gate.port
            } else {
                boundPort = Int(lws_get_vhost_listen_port(vhost))
            }
        }
        let nodeID = configuration.nodeID ?? "\(HostName.current()):\(boundPort)"
        guard NodeName.isValid(nodeID) else { throw ServerError(description: "invalid node id '\(nodeID)' (WIMZ_NODE_ID: [A-Za-z0-9_.:-]{1,128})") }
        let address = configuration.nodeAddress ?? "\(HostName.current()):\(boundPort)"
        cluster = ClusterAgent(conninfo: configuration.databaseURL,
                               identity: .init(nodeID: nodeID, address: address, incarnation: try Crypto.uuidV4()),
                               leaseSeconds: configuration.clusterLeaseSeconds) { mailbox.post(.cluster($0)) }
        hub.onDeviceArrived = { [unowned self] device in clusterBook.deviceArrived(device, now: MonotonicClock.nanoseconds()) }
        hub.onPresenceChanged = { [unowned self] device, leftAt in clusterBook.changed(device, robotLeftAt: leftAt) }
        gate?.onRequest = { [unowned self] request, body in
            let started = MonotonicClock.nanoseconds()
            guard let response = route(request, body: body) else { return nil }  // answered later
            logRequest(request, status: response.status, startedAt: started)
            return response
        }
        gate?.onClosed = { [unowned self] wsi in forgetExchange(wsi) }
        gate?.bodyLimit = { [maxBody = configuration.robotHTTPMaxBody] head in
            RobotHTTP.target(rawPath: head.rawPath) != nil ? maxBody : HTTPGate.bodyLimit
        }
        gate?.deferredTimeoutSeconds = Int32(max(30, configuration.robotHTTPTimeoutSeconds.rounded(.up) + 5))
        hub.onRobotHTTP = { [unowned self] payload, robot in robotAnswered(payload, from: robot) }
        let holdUntil = MonotonicClock.nanoseconds() + UInt64(configuration.upgradeHoldSeconds * 1e9)
        gate?.holdUpgrades = { [unowned self] in !credentials.isLoaded && MonotonicClock.nanoseconds() < holdUntil }
        gate?.onRefused = { [unowned self] error, peer in
            counters.requestsRefused += 1
            log.info("http_request_refused", metadata: ["status": .stringConvertible(error.status), "code": "\(error.code)", "message": "\(error.message)", "remote": "\(peer)"])
        }
        hub.onDrop = { [unowned self] reason in counters.drops[reason, default: 0] += 1 }
        hub.onForward = { [unowned self] role, bytes in
            let direction = (role == .robot ? RelayCounters.Direction.robotToApps : .appToRobot).rawValue
            counters.forwardedMessages[direction] += 1
            counters.forwardedBytes[direction] += bytes
        }
        hub.onRobotReplaced = { [unowned self] old, new in
            counters.robotsReplaced += 1
            audit(.robotReplaced, device: new.deviceID.rawValue, tokenID: new.tokenID, address: new.remoteAddress,
                  details: [("old_connection", .int(Int64(old.id))), ("new_connection", .int(Int64(new.id))),
                            ("old_address", .string(old.remoteAddress))])
        }
    }

    deinit {
        if let context { lws_context_destroy(context) }
        retryPolicy.deallocate()
        protocols.deallocate()
        free(protocolName)
        free(gateProtocolName)
        free(listenHost)
        retainedCStrings.forEach { free($0) }
    }

    /// The request's head: the gate's exact parse, or (TLS served by lws) lws's view of it.
    func requestHead(_ wsi: OpaquePointer) -> Result<HTTPRequestHead, RequestError> {
        if let gate {
            guard let head = gate.head(of: wsi) else {
                return .failure(RequestError(400, "bad_request", "one request per connection"))
            }
            return .success(head)
        }
        return HTTPRequest.rebuiltHead(wsi)
    }

    /// Serves until `requestStop()`; returns after a graceful stop.
    public func run() {
        guard let context else { return }
        log.info("listening", metadata: ["address": "\(configuration.listenHost):\(boundPort)", "event_loop": "\(configuration.eventLoop.rawValue)", "lws": "\(String(cString: lws_get_library_version()))"])
        monitor.start()
        auditWriter.start()
        adminWorker.start()
        cluster.start()
        let schedule: [(Int64, () -> Void)] = [(1_000_000, { [unowned self] in tick() }),
                                               (RelayServer.wheelInterval, { [unowned self] in tickWheel() }),
                                               (100_000, { [unowned self] in flushCluster() })]
        for (interval, action) in schedule {
            let timer = LWSTimer(action: action)
            timer.start(context: context, interval: interval)
            timers.append(timer)
        }
        // With libev, lws_service runs the event loop until finishStop() destroys the context.
        while !finished {
            if lws_service(context, 0) < 0 { break }
        }
        let loopEnded = MonotonicClock.nanoseconds()
        timers.forEach { $0.cancel() }
        timers.removeAll()
        // Leaving the cluster removes this node's presence with its row.
        cluster.stop()
        monitor.stop()
        adminWorker.stop()
        gate?.stop()
        waker.detach()
        let left = MonotonicClock.nanoseconds()
        lws_context_destroy(context)
        let destroyed = MonotonicClock.nanoseconds()
        // CLOSED callbacks above queued the last disconnect events: store or spool them.
        auditWriter.stop()
        self.context = nil
        // How long each part of the stop took (a slow stop shows where).
        func ms(_ from: UInt64?, _ to: UInt64) -> Logger.MetadataValue {
            .stringConvertible(from.map { Int64((to &- $0) / 1_000_000) } ?? -1)
        }
        let end = MonotonicClock.nanoseconds()
        log.info("stopped", metadata: ["closing_ms": ms(closingStartedAt, loopEnded), "leave_ms": ms(loopEnded, left),
                                       "destroy_ms": ms(left, destroyed), "flush_ms": ms(destroyed, end)])
    }

    /// Starts a graceful stop. Safe from any thread.
    public func requestStop() { mailbox.post(.stop) }

    /// A handle other threads (signal watcher) may keep to steer the running server.
    public var control: RelayControl { RelayControl(mailbox: mailbox) }

    // MARK: - Service-thread event handling

    /// Drains the mailbox (called from `LWS_CALLBACK_EVENT_WAIT_CANCELLED`).
    func handleMailbox() {
        for event in mailbox.drain() {
            switch event {
            case .stop:
                beginDrain()
            case .store(let storeEvent):
                handleStore(storeEvent)
            case .reloadTLS:
                reloadTLS()
            case .adminDone(let id, let response):
                adminDone(id, response)
            case .cluster(let clusterEvent):
                handleCluster(clusterEvent)
            }
        }
    }

    /// The end of a drain (RelayServer+Cluster.swift): refuse new upgrades, close every socket
    /// (1012 when other nodes can take the clients, 1001 otherwise), and leave the loop when all
    /// have closed or the grace period is over.
    func closeForStop() {
        drainUntil = nil
        guard !stopping, !finished else { return }
        stopping = true
        closingStartedAt = MonotonicClock.nanoseconds()
        // Nothing new: clients get "refused" and retry (elsewhere, behind a balancer) while the
        // service thread closes what is open.
        gate?.stopAccepting()
        log.info("stopping", metadata: ["open_connections": .stringConvertible(openConnections)])
        if clusterLiveNodes > 1 {
            hub.close(where: { _ in true }, code: .reconnectNow, reason: "node draining; reconnect")
        } else {
            hub.close(where: { _ in true }, code: .goingAway, reason: "server shutting down")
        }
        stopDeadline = MonotonicClock.nanoseconds() + UInt64(configuration.shutdownGraceSeconds) * 1_000_000_000
        if openConnections == 0 { finishStop() }
    }

    func finishStop() {
        guard !finished, let context else { return }
        finished = true
        // Nothing new may enter a context that is being destroyed (connections still arriving
        // would be adopted into it by the gate's timer).
        gate?.stop()
        // An event library's loop ends only through lws_context_destroy (deferred while inside
        // the service; run() completes it). lws's own loop just needs waking.
        if configuration.eventLoop == .libev { lws_context_destroy(context) } else { lws_cancel_service(context) }
    }

    /// Installs the certificate and key files' current contents on the listening vhost; new
    /// handshakes use them, established connections are untouched.
    private func reloadTLS() {
        guard let context, let certPath = configuration.tlsCertificatePath, let keyPath = configuration.tlsKeyPath else {
            log.info("tls_reload_skipped", metadata: ["reason": "TLS is not configured"])
            return
        }
        guard let cert = FileContents.read(certPath), let key = FileContents.read(keyPath) else {
            log.error("tls_reload_failed", metadata: ["reason": "cannot read certificate or key", "cert": "\(certPath)"])
            return
        }
        let rc = cert.withUnsafeBufferPointer { c in
            key.withUnsafeBufferPointer { k in
                c.withMemoryRebound(to: CChar.self) { cc in
                    k.withMemoryRebound(to: CChar.self) { kk in
                        lws_tls_cert_updated(context, certPath, keyPath, cc.baseAddress, cc.count, kk.baseAddress, kk.count)
                    }
                }
            }
        }
        if rc == 0 {
            log.info("tls_reloaded", metadata: ["cert": "\(certPath)"])
        } else {
            log.error("tls_reload_failed", metadata: ["reason": "lws rejected the certificate or key", "cert": "\(certPath)"])
        }
    }

    /// Queues an audit event (written asynchronously in batches); its details name the node.
    func audit(_ kind: AuditKind, device: String?, tokenID: Int64?, address: String?,
               details: [(String, JSONValue)] = []) {
        guard let event = try? AuditRepository.event(kind, actor: "relay", deviceID: device, tokenID: tokenID,
                                                     remoteAddress: address,
                                                     details: .object(details + [("node", .string(cluster.identity.nodeID))]))
        else { return }
        auditWriter.record(event)
    }

    private func handleStore(_ event: StoreEvent) {
        switch event {
        case .health(let health):
            log.log(level: health.state == .ready ? .info : .warning, "store_health",
                    metadata: ["state": "\(health.state.rawValue)", "reason": "\(health.reason)"])
            storeHealth = health
            if health.state == .ready, !announcedReady {
                announcedReady = true
                onReady?()
            }
        case .credentialSnapshot(let entries):
            credentials.load(entries)
            gate?.releaseHeldUpgrades()
            // Anything no longer in the snapshot was revoked, expired or removed while we were away.
            let active = Set(entries.map(\.token.id))
            let disabled = Set(entries.filter(\.deviceDisabled).map(\.token.deviceID))
            hub.close(where: { !active.contains($0.tokenID) || disabled.contains($0.deviceID) },
                      code: .revoked, reason: "token revoked or device disabled")
            log.info("credentials_loaded", metadata: ["tokens": .stringConvertible(entries.count)])
        case .tokenChanged(let id, let entry):
            credentials.update(id: id, entry: entry)
            if entry == nil || entry?.token.revokedAt != nil {
                let closed = hub.close(where: { $0.tokenID == id }, code: .revoked, reason: "token revoked")
                if !closed.isEmpty { log.info("token_revoked_sockets_closed", metadata: ["token_id": .stringConvertible(id), "sockets": .stringConvertible(closed.count)]) }
            }
        case .turnSecrets(let secrets):
            turn.update(secrets: secrets)
            pushToRobotsWithoutCredentials()
            log.info("turn_secrets_loaded", metadata: ["realm": "\(configuration.turnRealm)", "secrets": .stringConvertible(secrets.count)])
        case .deviceChanged(let device, let disabled):
            credentials.setDisabled(device, disabled)
            if disabled {
                let closed = hub.close(where: { $0.deviceID == device }, code: .revoked, reason: "device disabled")
                log.info("device_disabled_sockets_closed", metadata: ["device": "\(device.rawValue)", "sockets": .stringConvertible(closed.count)])
            }
        }
    }

    // MARK: - HTTP

    /// Answers a plain HTTP request through `Routes.table`; nil when the answer comes later
    /// (admin API, pairing, HTTP to the robot). `body` is the whole request body when the gate
    /// read it (nil: lws delivers it through callbacks).
    func route(_ request: HTTPRequest, body: [UInt8]? = nil) -> HTTPResponse? {
        let (method, path) = request.methodAndPath
        if path == "/ws/robot" || path == "/ws/app" {
            return .error(400, "upgrade_required", "this endpoint takes a WebSocket upgrade")
        }
        let isAdmin = path.hasPrefix("/admin/")
        if isAdmin, let refusal = adminRefusal(request) { return refusal }
        let route: Route
        let parameters: [String: String]
        switch Routes.resolve(method: method, rawPath: request.head.rawPath) {
        case .notFound: return .error(404, "not_found", isAdmin ? "no such admin endpoint" : "no such endpoint")
        case .methodNotAllowed(let allowed): return methodNotAllowed(allowed.joined(separator: ", "))
        case .found(let found, let found_parameters): (route, parameters) = (found, found_parameters)
        }
        let device = parameters["device_id"] ?? ""
        switch route.handler {
        case .healthz:
            return .json(200, .object([("status", "ok")]))
        case .readyz:
            if isDraining { return .json(503, .object([("status", "draining"), ("reason", "the node is stopping")])) }
            if storeHealth.state == .ready { return .json(200, .object([("status", "ready")])) }
            return .json(503, .object([("status", .string(storeHealth.state.rawValue)),
                                       ("reason", .string(storeHealth.reason))]))
        case .metrics: return metrics()
        case .turnCredentials: return turnCredentials(request)
        case .deviceStatus: return deviceStatus(request, device: device)
        case .robotHTTP:
            // The robot's path goes on exactly as sent: taken from the raw path.
            guard let target = RobotHTTP.target(rawPath: request.head.rawPath) else {
                return .error(404, "not_found", "no such endpoint")
            }
            return robotRequest(request, target: target, body: body)
        case .mintPairingCode: return mintPairingCode(request, device: device)
        case .redeemPairingCode:
            guard let body else {
                return .error(501, "not_supported", "pairing needs the relay's own HTTP front: terminate TLS at the balancer")
            }
            return redeemPairingCode(request, body: body)
        case .listAppTokens: return listAppTokens(request, device: device)
        case .revokeAppToken: return revokeAppToken(request, device: device, tokenText: parameters["token_id"] ?? "")
        case .admin: return beginAdmin(request, route: route, id: parameters["id"], body: body)
        case .adminPresence:
            // The cluster's view, merged with this node's own (fresher) one.
            guard let id = DeviceID(parameters["id"] ?? "") else { return .error(400, "bad_request", "invalid device id") }
            return presence(of: id, request)
        }
    }

    /// `GET /api/devices/ID/status`: presence, for a robot or app token of that device.
    private func deviceStatus(_ request: HTTPRequest, device idText: String) -> HTTPResponse? {
        guard let device = DeviceID(idText) else { return .error(400, "bad_request", "invalid device id") }
        switch authenticate(request, wants: "Authorization: Bearer <robot or app token> is required") {
        case .refused(let response): return response
        case .accepted(let entry):
            if entry.token.deviceID != device { return .authFailure(.wrongDevice, message: "token belongs to another device") }
            return presence(of: device, request)
        }
    }

    func methodNotAllowed(_ allowed: String) -> HTTPResponse {
        .error(405, "method_not_allowed", "use \(allowed)", headers: [("Allow", allowed)])
    }

    func logRequest(_ request: HTTPRequest, status: Int, startedAt: UInt64) {
        guard log.logLevel <= .info else { return }
        let (method, path) = request.methodAndPath
        log.info("http_request", metadata: ["method": "\(method)", "path": "\(Redaction.redactQuery(path))", "status": .stringConvertible(status), "remote": "\(request.peerAddress)", "duration_us": .stringConvertible((MonotonicClock.nanoseconds() - startedAt) / 1000)])
    }
}

/// The one lws protocol callback. lws calls it on the service thread; it finds the server
/// through the context's user pointer.
func relayCallback(_ wsi: OpaquePointer?, _ reason: lws_callback_reasons, _ user: UnsafeMutableRawPointer?,
                   _ input: UnsafeMutableRawPointer?, _ length: Int) -> Int32 {
    guard let wsi else { return 0 }
    guard let contextUser = lws_context_user(lws_get_context(wsi)) else {
        return lws_callback_http_dummy(wsi, reason, user, input, length)
    }
    let server = Unmanaged<RelayServer>.fromOpaque(contextUser).takeUnretainedValue()
    switch reason {
    case LWS_CALLBACK_EVENT_WAIT_CANCELLED:
        server.handleMailbox()
        return 0
    case LWS_CALLBACK_SERVER_NEW_CLIENT_INSTANTIATED:
        server.acceptedAt[wsi] = MonotonicClock.nanoseconds()
        return lws_callback_http_dummy(wsi, reason, user, input, length)
    case LWS_CALLBACK_HTTP_CONFIRM_UPGRADE:
        return server.confirmUpgrade(wsi)
    case LWS_CALLBACK_ESTABLISHED:
        return server.established(wsi, user: user)
    case LWS_CALLBACK_RECEIVE:
        guard let connection = Connection.from(user: user) else { return -1 }
        return server.receive(connection, input, length)
    case LWS_CALLBACK_RECEIVE_PONG:
        if let session = Connection.from(user: user)?.session {
            session.lastHeard = MonotonicClock.nanoseconds()
            server.log.debug("pong", metadata: ["connection": .stringConvertible(session.id)])
        }
        return 0
    case LWS_CALLBACK_SERVER_WRITEABLE:
        guard let connection = Connection.from(user: user) else { return 0 }
        return server.writeable(connection)
    case LWS_CALLBACK_CLOSED:
        server.closed(user)
        return 0
    case LWS_CALLBACK_HTTP:
        let started = MonotonicClock.nanoseconds()
        defer { server.gate?.forget(wsi) }
        let request: HTTPRequest
        switch server.requestHead(wsi) {
        case .success(let head): request = HTTPRequest(wsi: wsi, head: head)
        case .failure(let error):
            let refusal = HTTPRequest(wsi: wsi, head: HTTPRequestHead(method: "GET", path: "-"))
            _ = refusal.send(.error(error.status, error.code, error.message))
            return -1
        }
        guard let response = server.route(request) else { return 0 }  // answered later
        server.logRequest(request, status: response.status, startedAt: started)
        guard request.send(response) else { return -1 }
        return lws_http_transaction_completed(wsi) != 0 ? -1 : 0
    case LWS_CALLBACK_HTTP_BODY:
        return server.adminBody(wsi, input, length)
    case LWS_CALLBACK_HTTP_BODY_COMPLETION:
        server.adminBodyComplete(wsi)
        return 0
    case LWS_CALLBACK_HTTP_WRITEABLE:
        return server.adminWriteable(wsi)
    case LWS_CALLBACK_RAW_RX_FILE:
        guard let gate = server.gate, let vhost = lws_get_vhost(wsi) else { return -1 }
        return gate.readable(wsi, vhost: vhost)
    case LWS_CALLBACK_RAW_WRITEABLE_FILE:
        return server.gate?.writeable(wsi) ?? -1
    case LWS_CALLBACK_RAW_CLOSE_FILE:
        server.gate?.closed(wsi)
        return 0
    case LWS_CALLBACK_CLOSED_HTTP:
        server.gate?.forget(wsi)
        server.forgetExchange(wsi)
        server.acceptedAt[wsi] = nil
        return lws_callback_http_dummy(wsi, reason, user, input, length)
    default:
        return lws_callback_http_dummy(wsi, reason, user, input, length)
    }
}
