import RelayCore

/// Counters kept by the service thread (exported by /metrics).
struct RelayCounters {
    var authFailures: [AuthFailure: Int] = [:]
    var closes: [UInt16: Int] = [:]
    var drops: [DropReason: Int] = [:]
    var keepaliveTimeouts = 0
    /// Devices whose sockets were closed (1012) because another node claimed them.
    var devicesYielded = 0
    /// Request heads the gate refused (malformed, too large).
    var requestsRefused = 0
    var robotsReplaced = 0
    /// Messages and bytes accepted for forwarding, by the role that sent them.
    /// Per direction, indexed by `Direction` (plain array slots: these move per message,
    /// where a dictionary keyed by `Role` hashed its raw string twice per message).
    var forwardedMessages = [0, 0]
    var forwardedBytes = [0, 0]

    /// Forwarding directions, by the sending role.
    enum Direction: Int { case robotToApps = 0, appToRobot = 1 }
    /// HTTP requests to robots answered, by status (the relay's own refusals included).
    var robotHTTPStatuses: [Int: Int] = [:]
    /// HTTP to the robot: request complete → response written, in seconds.
    var robotHTTPSeconds = Histogram(bounds: [0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 15])
    /// Accept → ESTABLISHED, in seconds.
    var handshakeSeconds = Histogram(bounds: [0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1])
}

/// A Prometheus-style cumulative histogram.
struct Histogram {
    let bounds: [Double]
    private(set) var counts: [Int]
    private(set) var sum = 0.0
    private(set) var count = 0

    init(bounds: [Double]) {
        self.bounds = bounds
        counts = Array(repeating: 0, count: bounds.count)
    }

    mutating func observe(_ value: Double) {
        for (i, bound) in bounds.enumerated() where value <= bound { counts[i] += 1 }
        sum += value
        count += 1
    }
}
