/// HTTP requests to robots that wait for an answer (docs/protocol.md v1.1): which app connection
/// each belongs to, the answer as it arrives, the deadline. Service-thread state; pure logic
/// with an injected clock, so timeouts and limits are tested without sockets.
///
/// `Client` names the app's HTTP connection (the server uses the gate's connection handle).
public final class RobotHTTPExchanges<Client: Hashable> {
    public struct Limits: Sendable {
        /// How long the robot has to answer completely (nanoseconds).
        public var timeout: UInt64 = 15_000_000_000
        /// Largest response body; more: 502 `response_too_large`.
        public var maxResponseBody = 1 << 20
        /// Requests waiting per device; more: 429.
        public var maxPerDevice = 64
        public init() {}
    }

    /// A complete answer from the robot.
    public struct Answer: Equatable, Sendable {
        public var status: Int
        public var headers: [RobotHTTP.Header]
        public var body: [UInt8]
    }

    /// What a robot frame (or a timeout, or the robot going away) did to an exchange.
    public enum Outcome: Equatable {
        /// More body frames are to come.
        case pending
        /// Answer the client with the robot's response.
        case answered(Client, Answer, startedAt: UInt64)
        /// Answer the client with an error of the relay's own.
        case failed(Client, Failure, startedAt: UInt64)
        /// Nothing waits for this frame (answered already, timed out, another robot's): dropped.
        case unknown
    }

    /// The relay's own answer when the robot's cannot be given: `robot_timeout`,
    /// `response_too_large`, `robot_disconnected` or `bad_robot_response`.
    public typealias Failure = ErrorCode

    private final class Exchange {
        let client: Client
        let device: DeviceID
        let robot: UInt64
        let startedAt: UInt64
        var status: Int?
        var headers: [RobotHTTP.Header] = []
        var body: [UInt8] = []
        init(client: Client, device: DeviceID, robot: UInt64, startedAt: UInt64) {
            self.client = client
            self.device = device
            self.robot = robot
            self.startedAt = startedAt
        }
    }

    public let limits: Limits
    private var exchanges: [UInt64: Exchange] = [:]
    private var byClient: [Client: UInt64] = [:]
    private var perDevice: [DeviceID: Int] = [:]
    /// Every exchange has the same timeout, so deadlines come due in the order they began.
    private var deadlines = DeadlineFIFO<UInt64>()

    public init(limits: Limits = .init()) { self.limits = limits }

    /// Requests waiting for a robot.
    public var count: Int { exchanges.count }

    /// Starts an exchange for `client`, to be answered by robot session `robot` of `device`.
    /// Returns its id (random, the frame's `"h…"`: see `ExchangeID`), or nil when the device has too many waiting.
    public func begin(client: Client, device: DeviceID, robot: UInt64, now: UInt64) -> UInt64? {
        guard perDevice[device, default: 0] < limits.maxPerDevice else { return nil }
        var id = ExchangeID.random()
        while exchanges[id] != nil { id = ExchangeID.random() }
        exchanges[id] = Exchange(client: client, device: device, robot: robot, startedAt: now)
        byClient[client] = id
        perDevice[device, default: 0] += 1
        deadlines.append(id, deadline: now + limits.timeout)
        return id
    }

    /// Feeds a robot's `http_response` or `http_body` frame that came from robot session `robot`,
    /// with its body base64-decoded (empty for none). A frame whose body does not decode goes to
    /// `malformed(id:from:)` instead.
    public func receive(_ frame: RobotHTTP.RobotFrame, body: [UInt8], from robot: UInt64) -> Outcome {
        let id = frame.id
        guard let exchange = exchanges[id], exchange.robot == robot else { return .unknown }
        switch frame {
        case .response(_, let status, let headers, _, _):
            guard exchange.status == nil else { return fail(id, .badRobotResponse) }
            exchange.status = status
            exchange.headers = headers
        case .body:
            guard exchange.status != nil else { return fail(id, .badRobotResponse) }
        }
        guard exchange.body.count + body.count <= limits.maxResponseBody else { return fail(id, .responseTooLarge) }
        exchange.body += body
        if frame.more { return .pending }
        finish(id)
        return .answered(exchange.client, Answer(status: exchange.status ?? 502, headers: exchange.headers, body: exchange.body),
                         startedAt: exchange.startedAt)
    }

    /// A frame with this id could not be read: its exchange fails with 502.
    public func malformed(id: UInt64, from robot: UInt64) -> Outcome {
        guard let exchange = exchanges[id], exchange.robot == robot else { return .unknown }
        return fail(id, .badRobotResponse)
    }

    /// Exchanges past their deadline: each fails with 504.
    public func expire(now: UInt64) -> [Outcome] {
        deadlines.popExpired(now: now).compactMap { id in exchanges[id] != nil ? fail(id, .robotTimeout) : nil }
    }

    /// Robot session `robot` is gone (closed or replaced): its exchanges fail with 502.
    public func robotGone(_ robot: UInt64) -> [Outcome] {
        guard !exchanges.isEmpty else { return [] }  // the common case: no generic filter and sort per robot
        return exchanges.filter { $0.value.robot == robot }.keys.sorted().map { fail($0, .robotDisconnected) }
    }

    /// The client hung up: its exchange is dropped (a late answer is then `.unknown`).
    public func cancel(client: Client) {
        if let id = byClient[client] { finish(id) }
    }

    private func fail(_ id: UInt64, _ failure: Failure) -> Outcome {
        guard let exchange = exchanges[id] else { return .unknown }
        finish(id)
        return .failed(exchange.client, failure, startedAt: exchange.startedAt)
    }

    private func finish(_ id: UInt64) {
        guard let exchange = exchanges.removeValue(forKey: id) else { return }
        if byClient[exchange.client] == id { byClient[exchange.client] = nil }
        let left = perDevice[exchange.device, default: 1] - 1
        perDevice[exchange.device] = left > 0 ? left : nil
    }
}
