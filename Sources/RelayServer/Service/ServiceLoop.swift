import CLibWebSockets
import Logging
import RelayCore

#if canImport(Glibc)
import Glibc
#endif

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

/// The libwebsockets context and its one service thread: builds the context (protocols, vhost,
/// TLS, event loop, the plain-HTTP gate), runs it, keeps its timers, reloads TLS and destroys
/// it. Owns every C string and struct it hands to lws and frees them in `deinit`.
final class ServiceLoop: LoopControl {
    let thread = ServiceThread()
    let waker = ServiceWaker()
    /// The plain-HTTP front door (nil when lws serves TLS itself and listens).
    let gateListener: GateListener?
    /// The clients' sockets' TCP options (docs/operations.md "Cellular links"): the gate's
    /// listener gives them to its connections; with TLS served by lws, each is given them.
    let clientTCP: TCPLiveness
    /// The port actually bound (differs from the configuration when it asked for 0).
    private(set) var boundPort = 0
    /// Set once the loop is to end; `run` returns soon after.
    private(set) var finished = false

    private let configuration: RelayConfiguration
    private let log = Logger(label: "wimz.relay")
    private var context: OpaquePointer?
    private let protocols: UnsafeMutablePointer<lws_protocols>
    private let protocolName: UnsafeMutablePointer<CChar>
    private let gateProtocolName: UnsafeMutablePointer<CChar>
    private let listenHost: UnsafeMutablePointer<CChar>
    /// C strings lws keeps pointers to for the context's lifetime (TLS paths, ALPN).
    private var retainedCStrings: [UnsafeMutablePointer<CChar>] = []
    private let retryPolicy: UnsafeMutablePointer<lws_retry_bo_t>
    private var timers: [LWSTimer] = []

    /// The TLS 1.2 suites offered when lws serves TLS (Mozilla's "intermediate" list, less DHE).
    static let tls12Ciphers = "ECDHE-ECDSA-AES128-GCM-SHA256:ECDHE-RSA-AES128-GCM-SHA256:ECDHE-ECDSA-AES256-GCM-SHA384:"
        + "ECDHE-RSA-AES256-GCM-SHA384:ECDHE-ECDSA-CHACHA20-POLY1305:ECDHE-RSA-CHACHA20-POLY1305"

    /// Creates the context; lws calls `relayCallback` with `callbacks` as the context's user.
    init(configuration: RelayConfiguration, callbacks: ServiceCallbacks) throws {
        self.configuration = configuration
        let servesTLS = configuration.tlsCertificatePath != nil && configuration.tlsKeyPath != nil
        clientTCP = TCPLiveness(configuration)
        gateListener = servesTLS ? nil : try GateListener(host: configuration.listenHost, port: configuration.listenPort, tcp: clientTCP)
        // lws's own keepalive keeps every socket's timer in one sorted list (O(n) per PONG);
        // the relay pings from its own session wheel instead, so both lws timers are off.
        retryPolicy = .allocate(capacity: 1)
        retryPolicy.initialize(to: lws_retry_bo_t())
        protocolName = strdup("wimz-relay")
        gateProtocolName = strdup(GateListener.protocolName)
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
        info.port = gateListener == nil ? Int32(configuration.listenPort) : -2  // CONTEXT_PORT_NO_LISTEN_SERVER
        // Room for the largest head the gate lets through (it forwards only a few headers).
        info.max_http_header_data = UInt16(HTTPRequestHead.Limits().headerBytes + 1024)
        info.iface = UnsafePointer(listenHost)
        info.protocols = UnsafePointer(protocols)
        info.user = Unmanaged.passUnretained(callbacks).toOpaque()
        info.pt_serv_buf_size = 16 * 1024
        info.fd_limit_per_thread = UInt32(FileDescriptorLimit.set(wanted: configuration.maxDescriptors))
        // No LWS_SERVER_OPTION_VALIDATE_UTF8: the relay checks text messages itself (`UTF8Text`).
        info.options = CLibWebSockets_OPTION_DISABLE_IPV6()
        if configuration.listenHost.contains(":") { info.options &= ~CLibWebSockets_OPTION_DISABLE_IPV6() }
        // libev's epoll costs O(active sockets) per wakeup; lws's poll() loop costs O(all sockets).
        if configuration.eventLoop == .libev { info.options |= CLibWebSockets_OPTION_LIBEV() }
        // Keep lws's signal handling out of the way: signals are taken by the executable.
        info.vhost_name = UnsafePointer(protocolName)
        info.retry_and_idle_policy = UnsafePointer(retryPolicy)
        if let cert = configuration.tlsCertificatePath, let key = configuration.tlsKeyPath {
            // TLS 1.2+ only, and in 1.2 only forward-secret AEAD suites (ECDHE with AES-GCM or
            // ChaCha20-Poly1305; every 1.3 suite is both already); ALPN pinned to HTTP/1.1
            // (WebSockets here are RFC 6455 over HTTP/1.1).
            let c = strdup(cert)!, k = strdup(key)!, alpn = strdup("http/1.1")!, ciphers = strdup(ServiceLoop.tls12Ciphers)!
            retainedCStrings += [c, k, alpn, ciphers]
            info.ssl_cipher_list = UnsafePointer(ciphers)
            info.options |= CLibWebSockets_OPTION_DO_SSL_GLOBAL_INIT()
            info.ssl_cert_filepath = UnsafePointer(c)
            info.ssl_private_key_filepath = UnsafePointer(k)
            info.ssl_options_set = CLibWebSockets_TLS_NO_LEGACY_PROTOCOLS()
            info.alpn = UnsafePointer(alpn)
        }
        info.timeout_secs = 10

        guard let context = lws_create_context(&info) else {
            throw ServerError(description: "cannot listen on \(configuration.listenHost):\(configuration.listenPort) "
                + "(address in use, not an address of this host"
                + (configuration.eventLoop == .libev ? ", or the libev plugin libwebsockets-evlib-ev is missing)" : ")"))
        }
        self.context = context
        waker.attach(context)
        if let vhost = lws_get_vhost_by_name(context, protocolName) {
            if let gateListener {
                try gateListener.attach(to: vhost)
                boundPort = gateListener.port
            } else {
                boundPort = Int(lws_get_vhost_listen_port(vhost))
            }
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

    /// Runs `schedule`'s actions every `interval` microseconds, then serves until `finish()`.
    /// Returns when the loop has ended (the context still exists: `destroy()` ends it).
    func run(every schedule: [(interval: Int64, action: () -> Void)]) {
        guard let context else { return }
        thread.enter()
        for (interval, action) in schedule {
            let timer = LWSTimer(action: action)
            timer.start(context: context, interval: interval)
            timers.append(timer)
        }
        // With libev, lws_service runs the event loop until finish() destroys the context.
        while !finished {
            if lws_service(context, 0) < 0 { break }
        }
        timers.forEach { $0.cancel() }
        timers.removeAll()
    }

    /// Ends the loop: `run` returns soon after.
    func finish() {
        guard !finished, let context else { return }
        finished = true
        // Nothing new may enter a context that is being destroyed (connections still arriving
        // would be adopted into it by the gate's timer).
        gateListener?.stop()
        // An event library's loop ends only through lws_context_destroy (deferred while inside
        // the service; `destroy` completes it). lws's own loop just needs waking.
        if configuration.eventLoop == .libev { lws_context_destroy(context) } else { lws_cancel_service(context) }
    }

    func stopAccepting() { gateListener?.stopAccepting() }

    /// Destroys the context: every remaining connection gets its CLOSED callback now.
    func destroy() {
        gateListener?.stop()
        waker.detach()
        if let context { lws_context_destroy(context) }
        context = nil
    }

    /// Installs the certificate and key files' current contents on the listening vhost; new
    /// handshakes use them, established connections are untouched.
    func reloadTLS() {
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

    /// The lws library's version (for the listening log line).
    static var libraryVersion: String { String(cString: lws_get_library_version()) }
}

/// Errors starting the server.
public struct ServerError: Error, CustomStringConvertible {
    public var description: String
}
