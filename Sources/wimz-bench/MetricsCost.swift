import ArgumentParser
import CoreMetrics
import Foundation
import Prometheus

/// What the forwarding path's counters would cost as swift-metrics counters on swift-prometheus,
/// against the plain fields the relay keeps (`RelayCounters`): per forwarded message the relay
/// counts one message and its bytes, for its direction.
struct MetricsCost: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "metrics-cost",
        abstract: "Nanoseconds per forwarded message for its two counter updates: plain fields, swift-prometheus counters, and swift-metrics counters backed by swift-prometheus.")
    @Option(help: "Messages counted per variant and round.") var messages: Int = 20_000_000
    @Option(help: "Rounds; the best of them is reported.") var rounds: Int = 5

    /// The relay's own: an array slot per direction, on a class the service thread owns.
    final class PlainCounters {
        var messages = [0, 0]
        var bytes = [0, 0]
        var robotMessages = 0, robotBytes = 0, appMessages = 0, appBytes = 0
    }

    func run() {
        let plain = PlainCounters()
        let registry = PrometheusCollectorRegistry()
        let directions = ["robot_to_apps", "app_to_robot"]
        func descriptor(_ name: String) -> MetricNameDescriptor {
            MetricNameDescriptor(namespace: "wimz", metricName: name, unitName: "total", helpText: name)
        }
        let prometheus = directions.map { d in
            (registry.makeCounter(descriptor: descriptor("messages_forwarded"), labels: [("direction", d)]),
             registry.makeCounter(descriptor: descriptor("bytes_forwarded"), labels: [("direction", d)]))
        }
        let factory = PrometheusMetricsFactory(registry: PrometheusCollectorRegistry())
        let metrics = directions.map { d in
            (CoreMetrics.Counter(label: "wimz_messages_forwarded_total", dimensions: [("direction", d)], factory: factory),
             CoreMetrics.Counter(label: "wimz_bytes_forwarded_total", dimensions: [("direction", d)], factory: factory))
        }
        let n = messages
        let variants: [(String, () -> Void)] = [
            ("plain fields (the relay's)", {
                for i in 0..<n {
                    plain.messages[i & 1] += 1
                    plain.bytes[i & 1] += 200
                }
            }),
            ("plain Int fields, no arrays", {
                for i in 0..<n {
                    if i & 1 == 0 {
                        plain.robotMessages += 1
                        plain.robotBytes += 200
                    } else {
                        plain.appMessages += 1
                        plain.appBytes += 200
                    }
                }
            }),
            ("swift-prometheus Counter", {
                for i in 0..<n {
                    prometheus[i & 1].0.increment()
                    prometheus[i & 1].1.increment(by: Int64(200))
                }
            }),
            ("swift-metrics Counter on swift-prometheus", {
                for i in 0..<n {
                    metrics[i & 1].0.increment()
                    metrics[i & 1].1.increment(by: 200)
                }
            }),
        ]
        var best = [Double](repeating: .infinity, count: variants.count)
        for _ in 0..<rounds {
            for (k, variant) in variants.enumerated() {
                let started = DispatchTime.now().uptimeNanoseconds
                variant.1()
                best[k] = min(best[k], Double(DispatchTime.now().uptimeNanoseconds - started) / Double(n))
            }
        }
        withExtendedLifetime((plain, prometheus, metrics)) {}
        print("counter cost per forwarded message (2 updates), best of \(rounds) × \(n):")
        for (k, variant) in variants.enumerated() {
            let name = variant.0.padding(toLength: 44, withPad: " ", startingAt: 0)
            print(name + String(format: " %6.2f ns   %5.2f %% of a core at 400,000 msgs/s", best[k], best[k] * 400_000 / 1e9 * 100))
        }
        print("check: \(plain.messages.reduce(0, +) / rounds) messages counted per round")
    }
}
