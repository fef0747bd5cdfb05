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
        var liveActivity: LiveActivityEndpoint
        var household: HouseholdEndpoint
        var sealed: SealedEndpoint
        var settings: SettingsEndpoint
        var timeline: TimelineEndpoint
        var database: DatabaseExchanges
        var cluster: ClusterCoordinator
    }

    private let env: RelayEnvironment
    private let handlers: Handlers

    init(env: RelayEnvironment, handlers: Handlers) {
        self.env = env
        self.handlers = handlers
    }

    /// A route found, or the answer without one.
    enum Resolution {
        case route(Route, parameters: [String: String])
        case answer(HTTPResponse)
    }

    /// The route for `request`, or the 404/405 answer. The upgrade-only paths answer 400; where
    /// hidden routes are (the admin API), only the admin hears which paths and methods exist.
    func resolve(_ request: HTTPRequest) -> Resolution {
        let (method, path) = request.methodAndPath
        if path == WimzProtocol.Path.robotSocket || path == WimzProtocol.Path.appSocket {
            return .answer(.error(.upgradeRequired, "this endpoint takes a WebSocket upgrade"))
        }
        switch Routes.resolve(method: method, rawPath: request.head.rawPath) {
        case .found(let route, let parameters): return .route(route, parameters: parameters)
        case .methodNotAllowed(let allowed, let hidden):
            if hidden, let refusal = handlers.authenticator.adminRefusal(request) { return .answer(.error(refusal)) }
            let allow = allowed.joined(separator: ", ")
            return .answer(.error(.methodNotAllowed, "use \(allow)", headers: [("Allow", allow)]))
        case .notFound(let hidden):
            if hidden, let refusal = handlers.authenticator.adminRefusal(request) { return .answer(.error(refusal)) }
            return .answer(.error(.notFound, hidden ? "no such admin endpoint" : "no such endpoint"))
        }
    }

    /// A token route's caller: the entry of a token of the path's device (where it names one) and
    /// of the route's access, or the refusal (401/403/429/503 in the contract's terms, counted
    /// toward the address's failure limit; 400 for a malformed device id in the path).
    private func tokenEntry(_ request: HTTPRequest, _ access: Route.Access, _ handler: Route.Device,
                            _ parameters: [String: String]) -> Result<CredentialEntry, RelayError> {
        let authenticator = handlers.authenticator
        let role: Role? = switch access {
        case .robotOrApp: nil
        case .robot: .robot
        case .app, .owner, .household: .app
        }
        let wants = "Authorization: Bearer <\(access == .robotOrApp ? "robot or app" : role == .app ? "app" : "robot") token> is required"
        let result: Result<CredentialEntry, RelayError>
        if let deviceText = parameters["device_id"] {
            guard let device = DeviceID(deviceText) else { return .failure(RelayError(.badRequest, "invalid device id")) }
            result = authenticator.check(authenticator.credential(of: request), device: device, role: role, wants: wants,
                                         messages: [.wrongRole: handler.wrongRoleMessage(access)])
        } else {
            result = authenticator.check(authenticator.credential(of: request), wants: wants)
        }
        switch result {
        case .success(let entry):
            // The access table of v1.3: a token of the right device and role, but not its level.
            let rights = entry.token.rights
            if access == .owner, !rights.mayManageHousehold {
                return .failure(RelayError(.forbidden, "only an owner of the device may do this"))
            }
            if access == .household, !rights.mayListHousehold {
                return .failure(RelayError(.forbidden, "guests can't list the household"))
            }
            return .success(entry)
        case .failure(let refusal):
            return .failure(authenticator.refused(refusal, address: authenticator.clientAddress(request)))
        }
    }

    /// A request's route, found once from its head, with its caller checked.
    struct Routed {
        let route: Route
        let parameters: [String: String]
        /// The caller's entry on a token route.
        let entry: CredentialEntry?
    }

    /// What a head comes to before its body is read.
    enum Admission {
        /// Answered from the head alone: a refusal (404, 405, 400, 401, 403, 429, 503), so nobody
        /// without a credential makes the relay read or buffer a body.
        case answer(HTTPResponse)
        /// Its announced body is over the route's `limit` (413, the front door's to answer).
        case bodyTooLarge(limit: Int)
        /// Routed and its caller checked: read the body, then `serve`.
        case admitted(Routed)
    }

    /// The route for `request`'s head and its caller's check, once: the front door reads a body
    /// only for an admitted request, and serves it with what was found here.
    func admit(_ request: HTTPRequest, contentLength: Int = 0) -> Admission {
        let route: Route, parameters: [String: String]
        switch resolve(request) {
        case .answer(let response): return .answer(response)
        case .route(let found, let foundParameters): (route, parameters) = (found, foundParameters)
        }
        let limit = route.bodyLimit.bytes(env.configuration)
        guard contentLength <= limit else { return .bodyTooLarge(limit: limit) }
        switch route.kind {
        case .open: return .admitted(Routed(route: route, parameters: parameters, entry: nil))
        case .admin:
            if let refusal = handlers.authenticator.adminRefusal(request) { return .answer(.error(refusal)) }
            return .admitted(Routed(route: route, parameters: parameters, entry: nil))
        case .token(let access, let handler):
            switch tokenEntry(request, access, handler, parameters) {
            case .failure(let refusal): return .answer(.error(refusal))
            case .success(let entry): return .admitted(Routed(route: route, parameters: parameters, entry: entry))
            }
        }
    }

    /// The answer to an admitted request; nil when it comes later (admin API, pairing, HTTP to
    /// the robot). `body` is the whole request body when the gate read it (nil: lws delivers it
    /// through callbacks, TLS served by lws). `recheck`: time passed since it was admitted (a
    /// body was read), so its token is checked again — from the cache, by the digest it carries —
    /// and a token revoked meanwhile is refused.
    func serve(_ request: HTTPRequest, _ routed: Routed, recheck: Bool, body: [UInt8]? = nil) -> HTTPResponse? {
        env.thread.assertOnServiceThread()
        switch routed.route.kind {
        case .open(let handler): return open(handler, request, body: body)
        case .admin(let handler): return admin(handler, request, routed.route, routed.parameters, body: body)
        case .token(let access, let handler):
            guard var entry = routed.entry else { return .error(.internalError, "a token route without its caller") }
            if recheck {
                switch tokenEntry(request, access, handler, routed.parameters) {
                case .failure(let refusal): return .error(refusal)
                case .success(let current): entry = current
                }
            }
            return device(handler, request, entry: entry, routed.parameters, body: body)
        }
    }

    /// Admitted and served at once: a request whose body is not the gate's to read (TLS served
    /// by lws) or has none.
    func route(_ request: HTTPRequest, body: [UInt8]? = nil) -> HTTPResponse? {
        switch admit(request) {
        case .answer(let response): return response
        case .bodyTooLarge(let limit): return .error(.tooLarge, "request bodies are limited to \(limit) bytes here")
        case .admitted(let routed): return serve(request, routed, recheck: false, body: body)
        }
    }

    /// A token route's handler, with the caller's entry (of the route's device where the path names one).
    private func device(_ handler: Route.Device, _ request: HTTPRequest, entry: CredentialEntry, _ parameters: [String: String],
                        body: [UInt8]?) -> HTTPResponse? {
        let h = handlers
        let device = entry.token.deviceID
        switch handler {
        case .turnCredentials: return h.turn.credentials(request, entry: entry)
        case .deviceStatus:
            return h.cluster.presence(of: device, request,
                                      member: entry.token.role == .app ? .object(entry.token.memberFields) : nil)
        case .deviceState: return h.state.state(request, device: device)
        case .robotHTTP: return h.robotHTTP.request(request, entry: entry, path: parameters["path+"] ?? "/", body: body)
        case .registerPush: return h.push.register(request, entry: entry, body: body)
        case .listPush: return h.push.list(request, entry: entry)
        case .removePush: return h.push.remove(request, entry: entry, token: parameters["token"] ?? "")
        case .liveActivity(let call):
            let activity = parameters["activity_id"] ?? ""
            switch call {
            case .putStartToken: return h.liveActivity.register(request, entry: entry, activity: nil, body: body)
            case .removeStartToken: return h.liveActivity.remove(request, entry: entry, activity: nil)
            case .putActivity: return h.liveActivity.register(request, entry: entry, activity: activity, body: body)
            case .removeActivity: return h.liveActivity.remove(request, entry: entry, activity: activity)
            case .list: return h.liveActivity.list(request, entry: entry)
            }
        case .mintPairingCode: return h.pairing.mintPairingCode(request, entry: entry)
        case .listAppTokens: return h.pairing.listAppTokens(request, entry: entry)
        case .revokeAppToken: return h.pairing.revokeAppToken(request, entry: entry, tokenText: parameters["token_id"] ?? "")
        case .household(let call): return h.household.handle(request, call, entry: entry, parameters: parameters, body: body)
        case .sealed(let call): return h.sealed.handle(request, call, entry: entry, epoch: parameters["epoch"], kid: parameters["kid"], body: body)
        case .settings(.read): return h.settings.read(request, device: device)
        case .settings(.write): return h.settings.write(request, entry: entry, body: body)
        case .timeline(let call): return h.timeline.handle(request, call, entry: entry, body: body)
        }
    }

    /// The routes open to anyone.
    private func open(_ handler: Route.Open, _ request: HTTPRequest, body: [UInt8]?) -> HTTPResponse? {
        let h = handlers
        switch handler {
        case .healthz:
            return .json(200, .object([("status", "ok"), ("version", .string(RelayBuild.version))]))
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
        }
    }

    /// The admin API's routes (the admin token checked).
    private func admin(_ handler: Route.Admin, _ request: HTTPRequest, _ route: Route, _ parameters: [String: String],
                       body: [UInt8]?) -> HTTPResponse? {
        switch handler {
        case .endpoint(let endpoint):
            return handlers.database.beginAdmin(request, endpoint, route: route, id: parameters["id"], body: body)
        case .presence:
            // The cluster's view, merged with this node's own (fresher) one.
            guard let id = DeviceID(parameters["id"] ?? "") else { return .error(.badRequest, "invalid device id") }
            return handlers.cluster.presence(of: id, request)
        }
    }
}
