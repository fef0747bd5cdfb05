import CLibWebSockets
import RelayCore
import RelayStore
import Synchronization

#if canImport(Glibc)
import Glibc
#endif

/// What other threads tell the service thread.
enum ServiceEvent: Sendable {
    case store(StoreEvent)
    case stop
}

/// Wakes the service thread from any thread. `lws_cancel_service` is the one thread-safe
/// lws call; the context pointer is set once, before any other thread can post.
final class ServiceWaker: @unchecked Sendable {
    var context: OpaquePointer?
    func wake() { if let context { lws_cancel_service(context) } }
}

/// Thread-safe requests to a running `RelayServer`.
public struct RelayControl: Sendable {
    let mailbox: Mailbox<ServiceEvent>

    /// Starts a graceful stop.
    public func requestStop() { mailbox.post(.stop) }
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
    let log = Logger.shared
    let mailbox: Mailbox<ServiceEvent>
    private let waker = ServiceWaker()
    private var context: OpaquePointer?
    private let protocols: UnsafeMutablePointer<lws_protocols>
    private let protocolName: UnsafeMutablePointer<CChar>
    private let listenHost: UnsafeMutablePointer<CChar>
    private let monitor: StoreMonitor

    /// The port actually bound (differs from the configuration when it asked for 0).
    public private(set) var boundPort = 0
    /// Latest store state, as reported by the monitor (service thread only).
    private(set) var storeHealth = StoreHealth(state: .unavailable, reason: "not checked yet")
    private var finished = false
    private var announcedReady = false

    /// Called on the service thread once the relay listens and the store is ready (systemd READY=1).
    public var onReady: (() -> Void)?
    /// Called on the service thread when a graceful stop begins (systemd STOPPING=1).
    public var onStopping: (() -> Void)?

    public init(configuration: RelayConfiguration, migrator: Migrator) throws {
        self.configuration = configuration
        let waker = self.waker
        mailbox = Mailbox(wake: { waker.wake() })
        let mailbox = self.mailbox
        monitor = StoreMonitor(conninfo: configuration.databaseURL, migrator: migrator) { mailbox.post(.store($0)) }

        protocolName = strdup("wimz-relay")
        listenHost = strdup(configuration.listenHost)
        protocols = .allocate(capacity: 2)
        protocols.initialize(repeating: lws_protocols(), count: 2)
        protocols[0].name = UnsafePointer(protocolName)
        protocols[0].callback = relayCallback
        protocols[0].per_session_data_size = MemoryLayout<UnsafeMutableRawPointer>.size
        protocols[0].rx_buffer_size = 16 * 1024
        protocols[0].tx_packet_size = 64 * 1024

        LWSLogBridge.install(level: configuration.logLevel)

        var info = lws_context_creation_info()
        info.port = Int32(configuration.listenPort)
        info.iface = UnsafePointer(listenHost)
        info.protocols = UnsafePointer(protocols)
        info.user = Unmanaged.passUnretained(self).toOpaque()
        info.pt_serv_buf_size = 16 * 1024
        info.fd_limit_per_thread = UInt32(FileDescriptorLimit.raise())
        info.options = CLibWebSockets_OPTION_DISABLE_IPV6() | CLibWebSockets_OPTION_VALIDATE_UTF8()
        if configuration.listenHost.contains(":") { info.options &= ~CLibWebSockets_OPTION_DISABLE_IPV6() }
        // Keep lws's signal handling out of the way: signals are taken by the executable.
        info.vhost_name = UnsafePointer(protocolName)

        guard let context = lws_create_context(&info) else {
            protocols.deallocate()
            free(protocolName)
            free(listenHost)
            throw ServerError(description: "cannot listen on \(configuration.listenHost):\(configuration.listenPort) "
                + "(address in use, or not an address of this host)")
        }
        self.context = context
        waker.context = context
        if let vhost = lws_get_vhost_by_name(context, protocolName) {
            boundPort = Int(lws_get_vhost_listen_port(vhost))
        }
    }

    deinit {
        if let context { lws_context_destroy(context) }
        protocols.deallocate()
        free(protocolName)
        free(listenHost)
    }

    /// Serves until `requestStop()`; returns after a graceful stop.
    public func run() {
        guard let context else { return }
        log.info("listening", [("address", .string("\(configuration.listenHost):\(boundPort)")),
                               ("lws", .string(String(cString: lws_get_library_version())))])
        monitor.start()
        while !finished {
            if lws_service(context, 0) < 0 { break }
        }
        monitor.stop()
        lws_context_destroy(context)
        self.context = nil
        waker.context = nil
        log.info("stopped")
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
                beginStop()
            case .store(let storeEvent):
                handleStore(storeEvent)
            }
        }
    }

    private func beginStop() {
        guard !finished else { return }
        log.info("stopping")
        onStopping?()
        finished = true
    }

    private func handleStore(_ event: StoreEvent) {
        switch event {
        case .health(let health):
            let level: LogLevel = health.state == .ready ? .info : .warn
            log.log(level, "store_health", [("state", .string(health.state.rawValue)), ("reason", .string(health.reason))])
            storeHealth = health
            if health.state == .ready, !announcedReady {
                announcedReady = true
                onReady?()
            }
        case .credentialSnapshot, .tokenChanged, .deviceChanged:
            break
        }
    }

    // MARK: - HTTP

    /// Answers a plain HTTP request.
    func route(_ request: LWSConnection) -> HTTPResponse {
        let (method, path) = request.methodAndPath
        switch path {
        case "/healthz":
            guard method == "GET" || method == "HEAD" else { return methodNotAllowed("GET") }
            return .json(200, .object([("status", "ok")]))
        case "/readyz":
            guard method == "GET" || method == "HEAD" else { return methodNotAllowed("GET") }
            if storeHealth.state == .ready { return .json(200, .object([("status", "ready")])) }
            return .json(503, .object([("status", .string(storeHealth.state.rawValue)),
                                       ("reason", .string(storeHealth.reason))]))
        case "/ws/robot", "/ws/app":
            return .error(400, "upgrade_required", "this endpoint takes a WebSocket upgrade")
        default:
            return .error(404, "not_found", "no such endpoint")
        }
    }

    private func methodNotAllowed(_ allowed: String) -> HTTPResponse {
        .error(405, "method_not_allowed", "use \(allowed)", headers: [("Allow", allowed)])
    }

    func logRequest(_ request: LWSConnection, status: Int, startedAt: UInt64) {
        let (method, path) = request.methodAndPath
        log.info("http_request", [("method", .string(method)), ("path", .string(Redaction.redactQuery(path))),
                                  ("status", .int(Int64(status))), ("remote", .string(request.peerAddress)),
                                  ("duration_us", .int(Int64((MonotonicClock.nanoseconds() - startedAt) / 1000)))])
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
    case LWS_CALLBACK_HTTP:
        let started = MonotonicClock.nanoseconds()
        let request = LWSConnection(wsi: wsi)
        let response = server.route(request)
        server.logRequest(request, status: response.status, startedAt: started)
        guard request.send(response) else { return -1 }
        return lws_http_transaction_completed(wsi) != 0 ? -1 : 0
    default:
        return lws_callback_http_dummy(wsi, reason, user, input, length)
    }
}
