import RelayCore

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
        var database: DatabaseExchanges
        var cluster: ClusterCoordinator
    }

    private let env: RelayEnvironment
    private let handlers: Handlers

    init(env: RelayEnvironment, handlers: Handlers) {
        self.env = env
        self.handlers = handlers
    }

    /// The answer to `request`; nil when it comes later (admin API, pairing, HTTP to the
    /// robot). `body` is the whole request body when the gate read it (nil: lws delivers it
    /// through callbacks, TLS served by lws).
    func route(_ request: HTTPRequest, body: [UInt8]? = nil) -> HTTPResponse? {
        env.thread.assertOnServiceThread()
        let h = handlers
        let (method, path) = request.methodAndPath
        if path == "/ws/robot" || path == "/ws/app" {
            return .error(400, "upgrade_required", "this endpoint takes a WebSocket upgrade")
        }
        let isAdmin = path.hasPrefix("/admin/")
        if isAdmin, let refusal = h.authenticator.adminRefusal(request) { return refusal }
        let route: Route
        let parameters: [String: String]
        switch Routes.resolve(method: method, rawPath: request.head.rawPath) {
        case .notFound: return .error(404, "not_found", isAdmin ? "no such admin endpoint" : "no such endpoint")
        case .methodNotAllowed(let allowed):
            let allow = allowed.joined(separator: ", ")
            return .error(405, "method_not_allowed", "use \(allow)", headers: [("Allow", allow)])
        case .found(let found, let foundParameters): (route, parameters) = (found, foundParameters)
        }
        let device = parameters["device_id"] ?? ""
        switch route.handler {
        case .healthz:
            return .json(200, .object([("status", "ok")]))
        case .readyz:
            if h.stop.isDraining { return .json(503, .object([("status", "draining"), ("reason", "the node is stopping")])) }
            let health = h.store.health
            if health.state == .ready { return .json(200, .object([("status", "ready")])) }
            return .json(503, .object([("status", .string(health.state.rawValue)), ("reason", .string(health.reason))]))
        case .metrics: return h.metrics.render()
        case .turnCredentials: return h.turn.credentials(request)
        case .deviceStatus: return deviceStatus(request, device: device)
        case .deviceState: return h.state.state(request, device: device)
        case .robotHTTP:
            // The robot's path goes on exactly as sent: taken from the raw path.
            guard let target = RobotHTTP.target(rawPath: request.head.rawPath) else {
                return .error(404, "not_found", "no such endpoint")
            }
            return h.robotHTTP.request(request, target: target, body: body)
        case .mintPairingCode: return h.pairing.mintPairingCode(request, device: device)
        case .redeemPairingCode:
            guard let body else {
                return .error(501, "not_supported", "pairing needs the relay's own HTTP front: terminate TLS at the balancer")
            }
            return h.pairing.redeemPairingCode(request, body: body)
        case .pushRegistrations:
            return method == "PUT" ? h.push.register(request, device: device, body: body) : h.push.list(request, device: device)
        case .pushRegistration: return h.push.remove(request, device: device, token: parameters["token"] ?? "")
        case .listAppTokens: return h.pairing.listAppTokens(request, device: device)
        case .revokeAppToken: return h.pairing.revokeAppToken(request, device: device, tokenText: parameters["token_id"] ?? "")
        case .admin: return h.database.beginAdmin(request, route: route, id: parameters["id"], body: body)
        case .adminPresence:
            // The cluster's view, merged with this node's own (fresher) one.
            guard let id = DeviceID(parameters["id"] ?? "") else { return .error(400, "bad_request", "invalid device id") }
            return h.cluster.presence(of: id, request)
        }
    }

    /// The head alone, before the gate reads a body: a route that takes a credential refuses a
    /// request whose credential fails here and now, so nobody without one makes the relay read
    /// (or buffer) a body. The handler checks the same credential again once the body is in:
    /// this is an early answer, not a second policy. Nil: read the body.
    func refusalBeforeBody(_ request: HTTPRequest) -> HTTPResponse? {
        guard case .found(let route, let parameters) = Routes.resolve(method: request.head.method, rawPath: request.head.rawPath)
        else { return nil }
        let authenticator = handlers.authenticator
        let wants = "Authorization: Bearer <token> is required"
        let result: Result<CredentialEntry, Refusal>
        switch route.auth {
        case .none:
            return nil
        case .admin:
            return authenticator.adminRefusal(request)
        case .robotOrApp:
            result = authenticator.check(token: authenticator.bearerToken(request), wants: wants)
        case .robot, .app:
            guard let device = DeviceID(parameters["device_id"] ?? "") else { return nil }  // the handler's 400
            result = authenticator.check(token: authenticator.bearerToken(request), device: device,
                                         role: route.auth == .robot ? .robot : .app, wants: wants,
                                         messages: route.handler == .robotHTTP ? [.wrongRole: "HTTP to the robot takes an app token"]
                                             : route.handler == .pushRegistrations || route.handler == .pushRegistration
                                             ? [.wrongRole: "push registrations take an app token"]
                                             : [.wrongRole: "this call takes the robot's token"])
        }
        guard case .failure(let refusal) = result else { return nil }
        return authenticator.refused(refusal.failure, refusal.message, address: authenticator.clientAddress(request))
    }

    /// `GET /api/devices/ID/status`: presence, for a robot or app token of that device.
    private func deviceStatus(_ request: HTTPRequest, device idText: String) -> HTTPResponse? {
        guard let device = DeviceID(idText) else { return .error(400, "bad_request", "invalid device id") }
        switch handlers.authenticator.authenticate(request, wants: "Authorization: Bearer <robot or app token> is required") {
        case .refused(let response): return response
        case .accepted(let entry):
            if entry.token.deviceID != device { return .authFailure(.wrongDevice, message: "token belongs to another device") }
            return handlers.cluster.presence(of: device, request)
        }
    }
}
