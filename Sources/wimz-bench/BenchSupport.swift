import ArgumentParser
import Foundation
import WimzProtocol
import RelayCore

/// Spreads `rate` sends per second evenly from the first call on: `next()` returns the index
/// of the next send that is due, or nil until one is.
struct Pacer {
    let rate: Int
    private var start: UInt64 = 0
    private(set) var sent = 0

    init(rate: Int) { self.rate = rate }

    mutating func next() -> Int? {
        let now = monotonicNanos()
        if start == 0 { start = now }
        guard sent < Int(Double(now - start) / 1e9 * Double(rate)) else { return nil }
        defer { sent += 1 }
        return sent
    }
}

/// Opens a robot and an app for each of `devices`, at most 256 handshakes in flight (like
/// wsload's connect mode); prints the rate when `report` names the round.
func connectPairs(_ engine: LoadEngine, creds: [[String]], devices: [Int], report: String?,
                  appQuery: String = "") throws -> ([LoadSocket], [LoadSocket]) {
    var robots: [LoadSocket] = []
    var apps: [LoadSocket] = []
    let base = engine.handshakeTimes.count
    let baseFailures = engine.handshakeFailures
    let total = 2 * devices.count
    let t0 = monotonicNanos()
    while true {
        let done = engine.handshakeTimes.count - base + engine.handshakeFailures - baseFailures
        while robots.count + apps.count < total, robots.count + apps.count - done < 256 {
            let d = devices[robots.count == apps.count ? robots.count : apps.count]
            if robots.count == apps.count {
                guard let r = engine.open(path: "\(WimzProtocol.Path.robotSocket)?device_id=\(creds[d][0])", token: creds[d][1], isRobot: true, device: d)
                else { throw ValidationError("socket() failed") }
                robots.append(r)
            } else {
                guard let a = engine.open(path: "\(WimzProtocol.Path.appSocket)?device_id=\(creds[d][0])\(appQuery)", token: creds[d][2], isRobot: false, device: d)
                else { throw ValidationError("socket() failed") }
                apps.append(a)
            }
        }
        if done >= total { break }
        guard monotonicNanos() - t0 < 60_000_000_000 else { throw ValidationError("handshakes timed out") }
        engine.run(for: 1_000_000)
    }
    let span = Double(monotonicNanos() - t0) / 1e9
    guard engine.handshakeFailures == baseFailures else { throw ValidationError("\(engine.handshakeFailures - baseFailures) handshakes failed") }
    if let report {
        let hs = engine.handshakeTimes[base...].sorted()
        print(String(format: "handshakes      %d in %.3f s = %.0f/s (%@ token cache, 256 in flight)  p50 %.2f ms  p99 %.2f ms",
                     hs.count, span, Double(hs.count) / span, report, Double(percentile(hs, 0.5)) / 1e6,
                     Double(percentile(hs, 0.99)) / 1e6))
    }
    return (robots, apps)
}

/// Raises the soft RLIMIT_NOFILE to the hard limit; returns the new soft limit.
func raiseDescriptorLimit() -> Int {
    var limit = rlimit()
    getrlimit(Int32(RLIMIT_NOFILE.rawValue), &limit)
    limit.rlim_cur = limit.rlim_max
    setrlimit(Int32(RLIMIT_NOFILE.rawValue), &limit)
    getrlimit(Int32(RLIMIT_NOFILE.rawValue), &limit)
    return Int(limit.rlim_cur)
}

func percentile<T: BinaryInteger>(_ sorted: [T], _ p: Double) -> T {
    guard !sorted.isEmpty else { return 0 }
    return sorted[min(sorted.count - 1, Int(Double(sorted.count) * p))]
}

/// User + system CPU seconds of a process so far (/proc/PID/stat fields 14 and 15).
func cpuSeconds(_ pid: Int32) -> Double {
    guard let stat = try? String(contentsOfFile: "/proc/\(pid)/stat", encoding: .utf8),
          let end = stat.lastIndex(of: ")") else { return 0 }
    // After the command name: state is field 3, so utime (14) and stime (15) are at 11 and 12.
    let fields = stat[stat.index(after: end)...].split(separator: " ")
    guard fields.count > 12, let user = Double(fields[11]), let system = Double(fields[12]) else { return 0 }
    return (user + system) / Double(sysconf(Int32(_SC_CLK_TCK)))
}

func rssKB(_ pid: Int32) -> Int {
    guard let status = try? String(contentsOfFile: "/proc/\(pid)/status", encoding: .utf8) else { return 0 }
    for line in status.split(separator: "\n") where line.hasPrefix("VmRSS:") {
        return Int(line.split(separator: " ").dropFirst().first ?? "0") ?? 0
    }
    return 0
}
