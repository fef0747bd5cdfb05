import CLibWebSockets
import RelayCore
import RelayCrypto

/// The app's HTTP connection waiting for a robot's answer, and what the request log needs once
/// the answer comes. Equal by connection (one request per connection).
struct RobotHTTPClient: Hashable {
    let client: HTTPClient
    let method: String
    let path: String
    let peerAddress: String

    static func == (a: RobotHTTPClient, b: RobotHTTPClient) -> Bool { a.client == b.client }
    func hash(into hasher: inout Hasher) { hasher.combine(client) }
}

/// HTTP to the robot (docs/protocol.md v1.1 "The robot's API through the relay"): `/api/devices/{device_id}/robot/{path}`
/// checks the app token, sends the request over the robot's socket as an `http_request` frame
/// and answers later, when the robot's `http_response` (and `http_body` frames) arrived, it timed
/// out or the robot left. Owns the exchanges in flight and the per-token limit.
final class RobotHTTPEndpoint {
    private let env: RelayEnvironment
    private let hub: DeviceHub
    private let cluster: ClusterCoordinator
    private var exchanges: RobotHTTPExchanges<RobotHTTPClient>
    /// Per app token: HTTP requests to its robot.
    private var limiter: KeyedRateLimiter<Int64>

    init(env: RelayEnvironment, hub: DeviceHub, cluster: ClusterCoordinator) {
        self.env = env
        self.hub = hub
        self.cluster = cluster
        let configuration = env.configuration
        var limits = RobotHTTPExchanges<RobotHTTPClient>.Limits()
        limits.timeout = UInt64(configuration.robotHTTPTimeoutSeconds * 1e9)
        limits.maxResponseBody = configuration.robotHTTPMaxBody
        limits.maxPerDevice = configuration.robotHTTPMaxPending
        exchanges = RobotHTTPExchanges(limits: limits)
        limiter = KeyedRateLimiter(rate: configuration.robotHTTPRate, burst: configuration.robotHTTPBurst)
    }

    /// Requests waiting for a robot's answer.
    var waiting: Int { exchanges.count }

    /// Forgets idle limiters (the 1 s tick).
    func sweep(now: UInt64) { limiter.sweep(now: now) }

    /// Fails what waited past its deadline (the 10 ms wheel tick).
    func expire(now: UInt64) {
        if exchanges.count > 0 { exchanges.expire(now: now).forEach(finish) }
    }

    /// A robot left: what waited for it fails (502 `robot_disconnected`).
    func robotGone(_ robot: Session) { exchanges.robotGone(robot.id).forEach(finish) }

    /// The client hung up: its exchange is dropped.
    func cancel(_ client: HTTPClient) { exchanges.cancel(client: RobotHTTPClient(client: client, method: "", path: "", peerAddress: "")) }

    /// Nil: the answer comes later.
    func request(_ request: HTTPRequest, entry: CredentialEntry, path: String, body: [UInt8]?) -> HTTPResponse? {
        let response = startRobotRequest(request, entry: entry, path: path, body: body)
        if let response { env.counters.robotHTTPStatuses[response.status, default: 0] += 1 }
        return response
    }

    /// `path`: the robot's path as sent (the route's `{path+}`); `entry`: an app token of the
    /// device (the router checked it).
    private func startRobotRequest(_ request: HTTPRequest, entry: CredentialEntry, path: String,
                                   body: [UInt8]?) -> HTTPResponse? {
        let method = request.head.method
        let device = entry.token.deviceID
        guard let body else {
            return .error(.notSupported, "HTTP to the robot needs the relay's own HTTP front: terminate TLS at the balancer")
        }
        // A sealed device's API is reached only sealed, over the app's socket (v1.5).
        if hub.sealedEpoch(of: device) != nil {
            return .error(.sealedDevice, "this device is sealed: reach the robot's API with sealed http_request frames")
        }
        // A guest without control reads (GET, HEAD) but changes nothing (docs/protocol.md v1.3).
        if !entry.token.rights.mayCommand, method != "GET", method != "HEAD" {
            return .error(.forbidden, "a guest without control may only GET and HEAD the robot's API")
        }
        let now = env.clock.monotonic()
        guard limiter.allow(entry.token.id, now: now) else {
            return .error(.rateLimited, "over \(Int(env.configuration.robotHTTPRate)) requests/s for this token",
                          headers: [("Retry-After", "1")])
        }
        guard let robot = hub.robot(of: device), robot.closing == nil else {
            // The balancer sends this device here now (a node returned or was added) while its
            // robot may still sit on another node: claim the device, as a first socket would, so
            // the robot reconnects here; the app's retry after a second finds it.
            cluster.claimIfClustered(device, now: now)
            return .error(.deviceOffline, "the robot is not connected", headers: [("Retry-After", "1")])
        }
        let client = RobotHTTPClient(client: request.client, method: method, path: request.head.path, peerAddress: request.peerAddress)
        guard let id = exchanges.begin(client: client, device: device, robot: robot.id, now: now) else {
            return .error(.tooManyRequests, "too many requests are waiting for this robot", headers: [("Retry-After", "1")])
        }
        let frame = RobotHTTP.requestFrame(id: id, method: method, path: path, query: request.head.rawQuery,
                                           headers: RobotHTTP.forwardedRequestHeaders(request.head.headers),
                                           bodyBase64: body.isEmpty ? nil : Base64.encode(body),
                                           from: robot.wantsSenders ? Session.sender(tokenID: entry.token.id, rights: entry.token.rights) : nil)
        // A robot whose queue cannot take the request is busy, not slow: the app retries, and
        // the robot's socket (which every app of the device shares) stays up.
        guard robot.queue.fits(frame.count) else {
            exchanges.cancel(client: client)
            return .error(.tooManyRequests, "the robot's connection is busy; retry shortly", headers: [("Retry-After", "1")])
        }
        hub.deliver(Payload(frame), to: robot)
        return nil
    }

    /// What the app is told when the robot's answer cannot be given.
    static func message(_ failure: RobotHTTPExchanges<RobotHTTPClient>.Failure) -> String {
        switch failure {
        case .robotTimeout: "the robot did not answer in time"
        case .responseTooLarge: "the robot's response is over the relay's body limit"
        case .robotDisconnected: "the robot disconnected before it answered"
        default: "the robot's answer was malformed"
        }
    }

    /// A robot's `http_response`/`http_body` frame (from the hub).
    func answered(_ payload: Payload, from robot: Session) {
        switch RobotHTTP.parse(payload.bytes) {
        case .failure(let error):
            env.log.warning("robot_http_bad_frame", metadata: ["device": "\(robot.deviceID.rawValue)", "reason": "\(error.message)"])
            if let id = error.id { finish(exchanges.malformed(id: id, from: robot.id)) }
        case .success(let frame):
            guard let body = frame.body.map({ Base64.decode($0) }) ?? [] else {
                env.log.warning("robot_http_bad_frame", metadata: ["device": "\(robot.deviceID.rawValue)", "reason": "body is not base64"])
                finish(exchanges.malformed(id: frame.id, from: robot.id))
                return
            }
            finish(exchanges.receive(frame, body: body, from: robot.id))
        }
    }

    /// Writes the answer an exchange came to (robot's response, or the relay's 502/504).
    private func finish(_ outcome: RobotHTTPExchanges<RobotHTTPClient>.Outcome) {
        let client: RobotHTTPClient
        let response: HTTPResponse
        let started: UInt64
        switch outcome {
        case .pending: return
        case .unknown:
            env.counters.drops[.unknownResponse, default: 0] += 1
            return
        case .answered(let c, let answer, let startedAt):
            (client, started) = (c, startedAt)
            response = HTTPResponse(status: answer.status, contentType: nil, headers: answer.headers.map { ($0.name, $0.value) },
                                    body: client.method == "HEAD" ? [] : answer.body, noStore: false)
        case .failed(let c, let failure, let startedAt):
            (client, started) = (c, startedAt)
            response = .error(failure, RobotHTTPEndpoint.message(failure))
        }
        env.counters.robotHTTPStatuses[response.status, default: 0] += 1
        env.metrics.robotHTTPSeconds.record(Double(env.clock.monotonic() - started) / 1e9)
        env.logRequest(method: client.method, path: client.path, remote: client.peerAddress, status: response.status,
                       startedAt: started)
        _ = client.client.answer(response)  // written by the gate (with TLS served by lws, none: the client times out)
    }
}

extension RobotHTTPEndpoint: MetricsReporting {
    func report(to metrics: MetricsSink) {
        metrics.gauge("wimz_robot_http_waiting", "HTTP requests waiting for a robot's answer.", waiting)
    }
}
