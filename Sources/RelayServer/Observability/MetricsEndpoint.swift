import Prometheus
import RelayCore

/// `GET /metrics`: Prometheus text exposition (format 0.0.4). Every component reports its own
/// series (`MetricsReporting`); this renders them in the order `RelayComponents` lists them.
final class MetricsEndpoint {
    private let sink: MetricsSink
    private let reporters: [MetricsReporting]

    init(registry: PrometheusCollectorRegistry, reporters: [MetricsReporting]) {
        sink = MetricsSink(registry: registry)
        self.reporters = reporters
    }

    /// Sets the registry from every reporter, then renders it.
    func render() -> HTTPResponse {
        for reporter in reporters { reporter.report(to: sink) }
        return HTTPResponse(status: 200, contentType: "text/plain; version=0.0.4", body: sink.registry.emitToBuffer())
    }
}
