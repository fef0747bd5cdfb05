import RelayCore
import WimzProtocol

/// Answers plain HTTP requests through `Routes.table`: the upgrade-only paths, the admin token,
/// 404/405, then the route's handler. Health is answered here; every other route by its
/// component. Service thread only.
final class Router {
    /// The components the routes lead to.
    struct Handlers {
        var authenticator: Authenticator
        var store: StoreSync
        var stop: StopSequence
        var metrics: MetricsEndpoint
        var turn: TurnEndpoint
        var robotHTTP: RobotHTTPEndpoint
        var pairing: PairingEndpoint
        var state: StateEndpoint
        var push: PushEndpoint
        var household: HouseholdEndpoint
        var database: DatabaseExchanges
        var cluster: ClusterCoordinator
    }

    private let env: RelayEnvironment
    private let handlers: Handlers

    init(env: RelayEnvironment, handlers: Handlers) {
        self.env = env
        self.handlers = handlers
    }

    /// Who the router let through to a handler: the route's `auth`, checked.
    enum Caller {
        case anyone
        case admin
        /// A robot or app token (for the route's device, when it names one).
        case token(CredentialEntry)

        var entry: CredentialEntry? {
            if case .token(let entry) = self { return entry }
            return nil
        }
    }

    /// A route found, or the answer without one.
    enum Resolution {
        case route(Route, parameters: [String: String])
        case answer(HTTPResponse)
    }

    /// A caller let through, or the refusal.
    enum Authorization {
        case caller(Caller)
        case refused(HTTPResponse)
    }

    /// The route for `request`, or the 404/405 answer. The upgrade-only paths answer 400.
    func resolve(_ request: HTTPRequest) -> Resolution {
        let (method, path) = request.methodAndPath
        if path == WimzProtocol.Path.robotSocket || path == WimzProtocol.Path.appSocket {
            return .answer(.error(.upgradeRequired, "this endpoint takes a WebSocket upgrade"))
        }
        // The admin API says which of its paths and methods exist only to the admin.
        if path.hasPrefix("/admin/"), let refusal = handlers.authenticator.adminRefusal(request) { return .answer(refusal) }
        switch Routes.resolve(method: method, rawPath: request.head.rawPath) {
        case .found(let route, let parameters): return .route(route, parameters: parameters)
        case .methodNotAllowed(let allowed):
            let allow = allowed.joined(separator: ", ")
            return .answer(.error(.methodNotAllowed, "use \(allow)", headers: [("Allow", allow)]))
        case .notFound:
            return .answer(.error(.notFound, path.hasPrefix("/admin/") ? "no such admin endpoint" : "no such endpoint"))
        }
    }

    /// Checks the route's `auth` for `request`: the caller, or the refusal (401/403/429/503 in
    /// the contract's terms, counted toward the address's failure limit; 400 for a malformed
    /// device id in the path).
    func authorize(_ request: HTTPRequest, _ route: Route, _ parameters: [String: String]) -> Authorization {
        let authenticator = handlers.authenticator
        let role: Role?
        switch route.auth {
        case .none: return .caller(.anyone)
        case .admin: return authenticator.adminRefusal(request).map { .refused($0) } ?? .caller(.admin)
        case .robotOrApp: role = nil
        case .robot: role = .robot
        case .app, .owner, .household: role = .app
        }
        let wants = "Authorization: Bearer <\(route.auth == .robotOrApp ? "robot or app" : role == .app ? "app" : "robot") token> is required"
        let result: Result<CredentialEntry, Refusal>
        if let deviceText = parameters["device_id"] {
            guard let device = DeviceID(deviceText) else { return .refused(.error(.badRequest, "invalid device id")) }
            result = authenticator.check(token: authenticator.bearerToken(request), device: device, role: role, wants: wants,
                                         messages: [.wrongRole: route.wrongRoleMessage])
        } else {
            result = authenticator.check(token: authenticator.bearerToken(request), wants: wants)
        }
        switch result {
        case .success(let entry):
            // The access table of v1.3: a token of the right device and role, but not its level.
            let rights = entry.token.rights
            if route.auth == .owner, !rights.mayManageHousehold {
                return .refused(.error(.forbidden, "only an owner of the device may do this"))
            }
            if route.auth == .household, !rights.mayListHousehold {
                return .refused(.error(.forbidden, "guests can't list the household"))
            }
            return .caller(.token(entry))
        case .failure(let refusal):
            return .refused(authenticator.refused(refusal.failure, refusal.message, address: authenticator.clientAddress(request)))
        }
    }

    /// The head alone, before the gate reads a body: a request whose route or credential fails
    /// is answered now, so nobody without a credential makes the relay read (or buffer) a body.
    /// Nil: read the body (at most the route's limit), then `route`.
    func refusalBeforeBody(_ request: HTTPRequest) -> HTTPResponse? {
        switch resolve(request) {
        case .answer(let response): return response
        case .route(let route, let parameters):
            if case .refused(let refusal) = authorize(request, route, parameters) { return refusal }
            return nil
        }
    }

    /// The largest body `head`'s route reads.
    func bodyLimit(_ head: HTTPRequestHead) -> Int {
        guard case .found(let route, _) = Routes.resolve(method: head.method, rawPath: head.rawPath) else { return HTTPGate.bodyLimit }
        switch route.bodyLimit {
        case .standard: return HTTPGate.bodyLimit
        case .robotHTTP: return env.configuration.robotHTTPMaxBody
        }
    }

    /// The answer to `request`; nil when it comes later (admin API, pairing, HTTP to the
    /// robot). `body` is the whole request body when the gate read it (nil: lws delivers it
    /// through callbacks, TLS served by lws).
    func route(_ request: HTTPRequest, body: [UInt8]? = nil) -> HTTPResponse? {
        env.thread.assertOnServiceThread()
        let route: Route, parameters: [String: String], caller: Caller
        switch resolve(request) {
        case .answer(let response): return response
        case .route(let found, let foundParameters): (route, parameters) = (found, foundParameters)
        }
        switch authorize(request, route, parameters) {
        case .refused(let refusal): return refusal
        case .caller(let authorized): caller = authorized
        }
        return dispatch(request, route, parameters, caller: caller, body: body)
    }

    /// The route's handler, its caller checked.
    private func dispatch(_ request: HTTPRequest, _ route: Route, _ parameters: [String: String], caller: Caller,
                          body: [UInt8]?) -> HTTPResponse? {
        let h = handlers
        // Token routes: the entry, for the route's device where the path names one.
        guard let entry = caller.entry else { return dispatchUnauthenticated(request, route, parameters, body: body) }
        let device = entry.token.deviceID
        switch route.handler {
        case .turnCredentials: return h.turn.credentials(request, entry: entry)
        case .deviceStatus:
            return h.cluster.presence(of: device, request,
                                      member: entry.token.role == .app ? .object(entry.token.memberFields(labelled: false)) : nil)
        case .deviceState: return h.state.state(request, device: device)
        case .robotHTTP: return h.robotHTTP.request(request, entry: entry, path: parameters["path+"] ?? "/", body: body)
        case .registerPush: return h.push.register(request, entry: entry, body: body)
        case .listPush: return h.push.list(request, entry: entry)
        case .removePush: return h.push.remove(request, entry: entry, token: parameters["token"] ?? "")
        case .mintPairingCode: return h.pairing.mintPairingCode(request, entry: entry)
        case .listAppTokens: return h.pairing.listAppTokens(request, entry: entry)
        case .revokeAppToken: return h.pairing.revokeAppToken(request, entry: entry, tokenText: parameters["token_id"] ?? "")
        case .createInvite, .listInvites, .cancelInvite, .listMembers, .updateMember, .removeMember:
            return h.household.handle(request, route.handler, entry: entry, parameters: parameters, body: body)
        default: return .error(.internalError, "route without its handler")
        }
    }

    /// Routes open to anyone, and the admin API's (the admin token checked).
    private func dispatchUnauthenticated(_ request: HTTPRequest, _ route: Route, _ parameters: [String: String],
                                         body: [UInt8]?) -> HTTPResponse? {
        let h = handlers
        switch route.handler {
        case .healthz:
            return .json(200, .object([("status", "ok")]))
        case .readyz:
            if h.stop.isDraining { return .json(503, .object([("status", "draining"), ("reason", "the node is stopping")])) }
            let health = h.store.health
            if health.state == .ready { return .json(200, .object([("status", "ready")])) }
            return .json(503, .object([("status", .string(health.state.rawValue)), ("reason", .string(health.reason))]))
        case .metrics: return h.metrics.render()
        case .redeemPairingCode:
            guard let body else {
                return .error(.notSupported, "pairing needs the relay's own HTTP front: terminate TLS at the balancer")
            }
            return h.pairing.redeemPairingCode(request, body: body)
        case .admin(let endpoint): return h.database.beginAdmin(request, endpoint, route: route, id: parameters["id"], body: body)
        case .adminPresence:
            // The cluster's view, merged with this node's own (fresher) one.
            guard let id = DeviceID(parameters["id"] ?? "") else { return .error(.badRequest, "invalid device id") }
            return h.cluster.presence(of: id, request)
        default: return .error(.internalError, "route without its handler")
        }
    }
}
