import CLibWebSockets
import RelayCore

/// The context's user pointer. The loop needs it before the components that lws's callbacks
/// reach exist (they are built on the loop), so it is told their dispatch once `RelayServer` has
/// built them; lws calls nothing but its own set-up callbacks before `run`.
final class ServiceCallbacks {
    /// Unmanaged, so a callback reaches the dispatch without a retain and release per call (per
    /// forwarded message twice: callgrind counted the difference). `RelayComponents` owns it.
    private(set) var targets: Unmanaged<LWSDispatch>?

    func connect(_ targets: LWSDispatch) { self.targets = .passUnretained(targets) }
}

/// What lws callbacks lead to: each goes to the component it concerns.
final class LWSDispatch {
    private let env: RelayEnvironment
    private let heads: RequestHeads
    private let router: Router
    private let database: DatabaseExchanges
    private let robotHTTP: RobotHTTPEndpoint
    private let webSocket: WebSocketEndpoint
    private let gate: HTTPGate?
    private let events: ServiceEvents
    /// The TCP options lws's own accepted connections get (TLS served by lws; the gate's inherit
    /// them from its listener).
    private let acceptedTCP: TCPLiveness?

    init(env: RelayEnvironment, heads: RequestHeads, router: Router, database: DatabaseExchanges, robotHTTP: RobotHTTPEndpoint,
         webSocket: WebSocketEndpoint, gate: HTTPGate?, events: ServiceEvents, acceptedTCP: TCPLiveness?) {
        (self.env, self.heads, self.router, self.database, self.robotHTTP) = (env, heads, router, database, robotHTTP)
        (self.webSocket, self.gate, self.events, self.acceptedTCP) = (webSocket, gate, events, acceptedTCP)
    }

    /// `LWS_CALLBACK_HTTP`: a plain request lws parsed itself (TLS served by lws; with the gate,
    /// requests never reach lws as HTTP).
    func http(_ wsi: OpaquePointer) -> Int32 {
        let started = env.clock.monotonic()
        defer { heads.forget(wsi) }
        let request: HTTPRequest
        switch heads.head(of: wsi) {
        case .success(let head): request = LWSHTTP.request(wsi, head: head)
        case .failure(let error):
            _ = LWSHTTP.send(.error(error), on: wsi)
            return -1
        }
        guard let response = router.route(request) else { return 0 }  // answered later
        env.logRequest(request, status: response.status, startedAt: started)
        guard LWSHTTP.send(response, on: wsi) else { return -1 }
        return lws_http_transaction_completed(wsi) != 0 ? -1 : 0
    }

    /// `LWS_CALLBACK_CLOSED_HTTP`: whatever waited on this connection is dropped.
    func closedHTTP(_ wsi: OpaquePointer) {
        heads.forget(wsi)
        database.forget(HTTPClient(wsi))
        robotHTTP.cancel(HTTPClient(wsi))
        webSocket.forget(wsi)
    }
}

/// The one lws protocol callback. lws calls it on the service thread; it finds the dispatch
/// through the context's user pointer.
func relayCallback(_ wsi: OpaquePointer?, _ reason: lws_callback_reasons, _ user: UnsafeMutableRawPointer?,
                   _ input: UnsafeMutableRawPointer?, _ length: Int) -> Int32 {
    guard let wsi, let contextUser = lws_context_user(lws_get_context(wsi)),
          let targets = Unmanaged<ServiceCallbacks>.fromOpaque(contextUser).takeUnretainedValue().targets
    else { return lws_callback_http_dummy(wsi, reason, user, input, length) }
    return targets._withUnsafeGuaranteedRef { $0.dispatch(wsi, reason, user, input, length) }
}

extension LWSDispatch {
    func dispatch(_ wsi: OpaquePointer, _ reason: lws_callback_reasons, _ user: UnsafeMutableRawPointer?,
                  _ input: UnsafeMutableRawPointer?, _ length: Int) -> Int32 {
        switch reason {
        case LWS_CALLBACK_EVENT_WAIT_CANCELLED:
            events.drain()
            return 0
        case LWS_CALLBACK_SERVER_NEW_CLIENT_INSTANTIATED:
            if let acceptedTCP { acceptedTCP.apply(to: lws_get_socket_fd(wsi)) }
            webSocket.accepted(wsi)
            return lws_callback_http_dummy(wsi, reason, user, input, length)
        case LWS_CALLBACK_HTTP_CONFIRM_UPGRADE:
            return webSocket.confirmUpgrade(wsi)
        case LWS_CALLBACK_ESTABLISHED:
            return webSocket.established(wsi, user: user)
        case LWS_CALLBACK_RECEIVE:
            // The per-session data holds the connection until CLOSED: guaranteed for the call.
            guard let connection = Connection.unmanaged(user: user) else { return -1 }
            return connection._withUnsafeGuaranteedRef { webSocket.receive($0, input, length) }
        case LWS_CALLBACK_RECEIVE_PONG:
            if let connection = Connection.from(user: user) { webSocket.pong(connection) }
            return 0
        case LWS_CALLBACK_SERVER_WRITEABLE:
            guard let connection = Connection.unmanaged(user: user) else { return 0 }
            return connection._withUnsafeGuaranteedRef { webSocket.writeable($0) }
        case LWS_CALLBACK_CLOSED:
            webSocket.closed(user)
            return 0
        case LWS_CALLBACK_HTTP:
            return http(wsi)
        case LWS_CALLBACK_HTTP_BODY:
            if let input { database.bodyChunk(HTTPClient(wsi), UnsafeRawBufferPointer(start: input, count: length)) }
            return 0
        case LWS_CALLBACK_HTTP_BODY_COMPLETION:
            database.bodyComplete(HTTPClient(wsi))
            return 0
        case LWS_CALLBACK_HTTP_WRITEABLE:
            return database.writeable(HTTPClient(wsi))
        case LWS_CALLBACK_RAW_RX_FILE:
            guard let gate, let listener = heads.listener, !listener.isStopped else { return -1 }
            if listener.isListening(wsi) {
                listener.acceptPending(for: gate)
                return 0
            }
            return gate.readable(wsi)
        case LWS_CALLBACK_RAW_WRITEABLE_FILE:
            return gate?.writeable(wsi) ?? -1
        case LWS_CALLBACK_RAW_CLOSE_FILE:
            heads.listener?.closed(wsi)
            gate?.closed(wsi)
            return 0
        case LWS_CALLBACK_CLOSED_HTTP:
            closedHTTP(wsi)
            return lws_callback_http_dummy(wsi, reason, user, input, length)
        default:
            return lws_callback_http_dummy(wsi, reason, user, input, length)
        }
    }
}
