import Prometheus

/// A component that reports its own series at scrape time (`GET /metrics` is a loop over them,
/// `MetricsEndpoint`): it reads only its own state, so what a series means is written beside
/// the code that counts it.
protocol MetricsReporting: AnyObject {
    func report(to metrics: MetricsSink)
}

/// Where reporters write: gauges are set, counters are moved up to the running totals the
/// components keep as plain fields (see `RelayCounters` for why plain fields).
final class MetricsSink {
    let registry: PrometheusCollectorRegistry
    /// What each counter was when last copied into the registry (its counters only go up).
    private var exported: [String: Int] = [:]

    init(registry: PrometheusCollectorRegistry) { self.registry = registry }

    func gauge(_ name: String, _ help: String, _ value: Int) { gauge(name, help, [], value) }

    func counter(_ name: String, _ help: String, _ value: Int) { counter(name, help, [], value) }

    func gauge(_ name: String, _ help: String, _ labels: [(String, String)], _ value: Int) {
        registry.makeGauge(descriptor: descriptor(name, help), labels: labels).set(to: Double(value))
    }

    /// Moves the registry's counter up to `value` (counted elsewhere, as a plain field).
    func counter(_ name: String, _ help: String, _ labels: [(String, String)], _ value: Int) {
        let key = name + labels.map { "\u{1}\($0.0)=\($0.1)" }.joined()
        let delta = value - (exported[key] ?? 0)
        let counter = registry.makeCounter(descriptor: descriptor(name, help), labels: labels)
        if delta > 0 { counter.increment(by: Int64(delta)) }
        exported[key] = value
    }

    private func descriptor(_ name: String, _ help: String) -> MetricNameDescriptor {
        MetricNameDescriptor(metricName: name, unitName: "", helpText: help)
    }
}
