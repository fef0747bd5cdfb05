import Prometheus
import RelayCore

/// Counters kept by the service thread, as plain fields: bumped where things happen (the
/// forwarding path's two per message among them) and copied into the Prometheus registry when
/// /metrics is scraped (`MetricsEndpoint`). Plain fields cost 5.7 ns per forwarded message where
/// swift-prometheus counters cost 16.5 and swift-metrics counters on them 18.7
/// (`wimz-bench metrics-cost`, docs/performance.md).
struct RelayCounters {
    // Counters by label start with every label they usually carry at zero: a dashboard's rate()
    // has a series before the first event (an absent series reads "no data", not 0).
    var authFailures: [AuthFailure: Int] = Dictionary(uniqueKeysWithValues: [
        AuthFailure.missingToken, .unknownToken, .expiredToken, .revokedToken, .wrongDevice, .wrongRole, .deviceDisabled,
    ].map { ($0, 0) })
    var closes: [UInt16: Int] = Dictionary(uniqueKeysWithValues: CloseCode.allCases.map { ($0.rawValue, 0) })
    var drops: [DropReason: Int] = Dictionary(uniqueKeysWithValues: ([.queueFull, .unknownResponse, .noApps, .unsealed]
        + [ErrorCode.rateLimited, .deviceOffline, .forbiddenType, .forbidden, .badMessage, .robotBusy, .sealedDevice]
            .map(DropReason.refused))
        .map { ($0, 0) })
    var keepaliveTimeouts = 0
    /// Sockets closed (4003) because their token expired.
    var tokenExpiryCloses = 0
    /// Devices whose sockets were closed (1012) because another node claimed them.
    var devicesYielded = 0
    /// Request heads the gate refused (malformed, too large).
    var requestsRefused = 0
    var robotsReplaced = 0
    /// Requests answered 503 `busy` because the database worker's queue was full.
    var databaseQueueFull = 0
    /// Pairing attempts refused from memory (the address was already over its failure limit).
    var pairingRefusedInMemory = 0
    /// HTTP requests to robots answered, by status (the relay's own refusals included).
    var robotHTTPStatuses: [Int: Int] = [:]
}

/// The relay's Prometheus registry (swift-prometheus) and the histograms observed directly into
/// it (one observation per handshake or robot request: no hot path).
final class RelayMetrics {
    let registry = PrometheusCollectorRegistry()
    /// Accept → ESTABLISHED, in seconds.
    let handshakeSeconds: ValueHistogram
    /// HTTP to the robot: request complete → response written, in seconds.
    let robotHTTPSeconds: ValueHistogram
    /// A push: handed to the sender (the event, or its window's end) → APNs answered, in seconds.
    let pushSeconds: ValueHistogram

    init() {
        handshakeSeconds = registry.makeValueHistogram(
            descriptor: MetricNameDescriptor(metricName: "wimz_handshake_seconds", unitName: "",
                                             helpText: "WebSocket handshake latency, accept to established."),
            buckets: [0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1])
        robotHTTPSeconds = registry.makeValueHistogram(
            descriptor: MetricNameDescriptor(metricName: "wimz_robot_http_duration_seconds", unitName: "",
                                             helpText: "HTTP to the robot: request read to answer written (requests that reached a robot)."),
            buckets: [0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 15])
        pushSeconds = registry.makeValueHistogram(
            descriptor: MetricNameDescriptor(metricName: "wimz_push_duration_seconds", unitName: "",
                                             helpText: "A push: event (or window end) to APNs's answer, retries included."),
            buckets: [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 15, 60])
    }
}
