import CLibWebSockets
import RelayCore
import RelayCrypto
import RelayStore

/// The app's HTTP connection waiting for a robot's answer: the gate's handle, and what the
/// request log needs once the answer comes. Equal by handle (one request per connection).
struct RobotHTTPClient: Hashable {
    let wsi: OpaquePointer
    let method: String
    let path: String

    static func == (a: RobotHTTPClient, b: RobotHTTPClient) -> Bool { a.wsi == b.wsi }
    func hash(into hasher: inout Hasher) { hasher.combine(wsi) }
}

extension RelayServer {
    /// `/api/devices/{device_id}/robot/{path}` (PROTOCOL.md v1.1): checks the app token, sends
    /// the request over the robot's socket as an `http_request` frame and answers later, when
    /// the robot's `http_response` (and `http_body` frames) arrived, it timed out or the robot
    /// left. Nil: the answer comes later.
    func robotRequest(_ request: HTTPRequest, target: (device: String, path: String), body: [UInt8]?) -> HTTPResponse? {
        let response = startRobotRequest(request, target: target, body: body)
        if let response { counters.robotHTTPStatuses[response.status, default: 0] += 1 }
        return response
    }

    private func startRobotRequest(_ request: HTTPRequest, target: (device: String, path: String),
                                   body: [UInt8]?) -> HTTPResponse? {
        let method = request.head.method
        guard let body else {
            return .error(501, "not_supported", "HTTP to the robot needs the relay's own HTTP front: terminate TLS at the balancer")
        }
        guard let device = DeviceID(target.device) else {
            return .error(400, "bad_request", "device id is not [A-Za-z0-9_.-]{1,64}")
        }
        let entry: CredentialEntry
        switch authenticate(request, wants: "Authorization: Bearer <app token of this device> is required") {
        case .refused(let response): return response
        case .accepted(let found): entry = found
        }
        switch CredentialRules.authorize(entry, device: device, role: .app, at: .now()) {
        case .failure(let failure):
            let message = failure == .wrongRole ? "HTTP to the robot takes an app token" : "token \(failure.rawValue)"
            return .authFailure(failure, message: failure == .wrongDevice ? "token belongs to another device" : message)
        case .success: break
        }
        let now = MonotonicClock.nanoseconds()
        guard robotHTTPLimiter.allow(entry.token.id, now: now) else {
            return .error(429, "rate_limited", "over \(Int(configuration.robotHTTPRate)) requests/s for this token",
                          headers: [("Retry-After", "1")])
        }
        guard let robot = hub.robot(of: device), robot.closing == nil else {
            // The balancer sends this device here now (a node returned or was added) while its
            // robot may still sit on another node: claim the device, as a first socket would, so
            // the robot reconnects here; the app's retry after a second finds it.
            if clusterLiveNodes > 1 { clusterBook.deviceArrived(device, now: now) }
            return .error(503, "device_offline", "the robot is not connected", headers: [("Retry-After", "1")])
        }
        let client = RobotHTTPClient(wsi: request.wsi, method: method, path: request.head.path)
        guard let id = robotExchanges.begin(client: client, device: device, robot: robot.id, now: now) else {
            return .error(429, "too_many_requests", "too many requests are waiting for this robot", headers: [("Retry-After", "1")])
        }
        let frame = RobotHTTP.requestFrame(id: id, method: method, path: target.path, query: request.head.rawQuery,
                                           headers: RobotHTTP.forwardedRequestHeaders(request.head.headers),
                                           bodyBase64: body.isEmpty ? nil : Base64.encode(body))
        // A robot whose queue cannot take the request is busy, not slow: the app retries, and
        // the robot's socket (which every app of the device shares) stays up.
        guard robot.queue.fits(frame.count) else {
            robotExchanges.cancel(client: client)
            return .error(429, "too_many_requests", "the robot's connection is busy; retry shortly", headers: [("Retry-After", "1")])
        }
        hub.deliver(Payload(frame), to: robot)
        return nil
    }

    /// A robot's `http_response`/`http_body` frame (from the hub).
    func robotAnswered(_ payload: Payload, from robot: Session) {
        switch RobotHTTP.parse(payload.bytes) {
        case .failure(let error):
            log.warning("robot_http_bad_frame", metadata: ["device": "\(robot.deviceID.rawValue)", "reason": "\(error.message)"])
            if let id = error.id { finishRobotRequest(robotExchanges.malformed(id: id, from: robot.id)) }
        case .success(let frame):
            guard let body = frame.body.map({ Base64.decode($0) }) ?? [] else {
                log.warning("robot_http_bad_frame", metadata: ["device": "\(robot.deviceID.rawValue)", "reason": "body is not base64"])
                finishRobotRequest(robotExchanges.malformed(id: frame.id, from: robot.id))
                return
            }
            finishRobotRequest(robotExchanges.receive(frame, body: body, from: robot.id))
        }
    }

    /// Writes the answer an exchange came to (robot's response, or the relay's 502/504).
    func finishRobotRequest(_ outcome: RobotHTTPExchanges<RobotHTTPClient>.Outcome) {
        let client: RobotHTTPClient
        let response: HTTPResponse
        let started: UInt64
        switch outcome {
        case .pending: return
        case .unknown:
            counters.drops[.unknownResponse, default: 0] += 1
            return
        case .answered(let c, let answer, let startedAt):
            (client, started) = (c, startedAt)
            response = HTTPResponse(status: answer.status, contentType: nil, headers: answer.headers.map { ($0.name, $0.value) },
                                    body: client.method == "HEAD" ? [] : answer.body, noStore: false)
        case .failed(let c, let failure, let startedAt):
            (client, started) = (c, startedAt)
            response = .error(failure.status, failure.rawValue, failure.message)
        }
        counters.robotHTTPStatuses[response.status, default: 0] += 1
        counters.robotHTTPSeconds.observe(Double(MonotonicClock.nanoseconds() - started) / 1e9)
        logRequest(HTTPRequest(wsi: client.wsi, head: HTTPRequestHead(method: client.method, path: client.path)),
                   status: response.status, startedAt: started)
        gate?.respond(client.wsi, with: response)
    }

    /// Bearer token → its mirror entry, with the contract's 401/503 when there is none and the
    /// credential rules (expired, revoked, disabled) checked. `wants` is the 401's message.
    func authenticate(_ request: HTTPRequest, wants: String) -> Authentication {
        guard let token = bearerToken(request) else { return .refused(.authFailure(.missingToken, message: wants)) }
        guard let entry = credentials.lookup(token: token) else {
            return .refused(credentials.isLoaded ? .authFailure(.unknownToken, message: "unknown token")
                : .authFailure(.storeUnavailable, message: "credential store unavailable; retry shortly"))
        }
        if case .failure(let failure) = CredentialRules.check(entry, at: .now()) {
            return .refused(.authFailure(failure, message: failure == .deviceDisabled ? "device disabled" : "token \(failure.rawValue)"))
        }
        return .accepted(entry)
    }
}

/// A bearer token checked for an HTTP request: its entry, or the response refusing it.
enum Authentication {
    case accepted(CredentialEntry)
    case refused(HTTPResponse)
}
