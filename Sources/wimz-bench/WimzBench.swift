import ArgumentParser
import Foundation
import WimzProtocol
import RelayCore
import RelayStore

/// `wimz-bench`: loopback benchmark of a running wimz-relay (see scripts/bench.sh, which
/// provisions a private database, starts the relay and calls this).
@main
struct WimzBench: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "wimz-bench",
        abstract: "Benchmark a wimz-relay over loopback: fan-out, latency, handshakes, idle memory.",
        subcommands: [Provision.self, Run.self, Stalls.self, RobotLeg.self, HistoryMemory.self, MetricsCost.self, SealedCost.self])

    struct Provision: ParsableCommand {
        static let configuration = CommandConfiguration(abstract: "Create devices with a robot and an app token each; write device_id,robot_token,app_token CSV.")
        @Option(name: .customLong("database-url")) var databaseURL: String
        @Option var devices: Int = 100
        @Option var out: String

        func run() throws {
            let db = try PGConnection(conninfo: databaseURL)
            var csv = "device_id,robot_token,app_token\n"
            do {
                for i in 0..<devices {
                    let id = DeviceID(String(format: "bench%05d", i))!
                    if try DeviceRepository(db).get(id) == nil { try DeviceRepository(db).add(id, name: "", actor: "bench") }
                    let robot = try TokenRepository(db).issue(device: id, role: .robot, label: "bench", expiresIn: nil, actor: "bench")
                    let app = try TokenRepository(db).issue(device: id, role: .app, label: "bench", expiresIn: nil, actor: "bench")
                    csv += "\(id),\(robot.secret),\(app.secret)\n"
                }
            }
            try csv.write(toFile: out, atomically: true, encoding: .utf8)
        }
    }

    struct Stalls: ParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Spin on one CPU and report the times it did not run (the machine's scheduling noise).",
            discussion: "Run one per core at once (taskset) to see what a loaded machine takes away: a stall of the relay's or the load's core delays every message in flight by as much.")
        @Option var seconds: Double = 10
        @Option var label: String = ""

        func run() {
            var stalls: [UInt64] = []
            let end = monotonicNanos() + UInt64(seconds * 1e9)
            var previous = monotonicNanos()
            while previous < end {
                let now = monotonicNanos()
                if now - previous >= 100_000 { stalls.append(now - previous) }
                previous = now
            }
            let overMillisecond = stalls.filter { $0 >= 1_000_000 }
            print(String(format: "stalls %@  %d of 0.1-1 ms, %d of >= 1 ms (%.1f ms in all), longest %.2f ms in %.0f s",
                         label, stalls.count - overMillisecond.count, overMillisecond.count,
                         Double(overMillisecond.reduce(0, +)) / 1e6, Double(stalls.max() ?? 0) / 1e6, seconds))
        }
    }

    struct HistoryMemory: ParsableCommand {
        static let configuration = CommandConfiguration(
            commandName: "history-memory",
            abstract: "Memory of missed-event recovery: fill the history of N devices with events of a size and report the resident memory per device.")
        @Option var devices: Int = 2000
        @Option var size: Int = 250
        @Option var messages: Int = 256

        func run() {
            var limits = DeviceHistory.Limits()
            limits.maxMessages = messages
            let before = residentKB()
            var histories: [DeviceHistory] = []
            var counted = 0
            for d in 0..<devices {
                let history = DeviceHistory(epoch: "e\(d)", limits: limits)
                // Each event its own buffer, as each received message is.
                for n in 0..<(messages + 10) {
                    let head = Array(#"{"type":"event","event":"bark_detected","data":{"n":\#(n),"pad":""#.utf8)
                    let bytes = head + [UInt8](repeating: 120, count: max(0, size - head.count - 3)) + Array(#""}}"#.utf8)
                    history.append(Payload(bytes), now: 0, used: &counted)
                }
                histories.append(history)
            }
            let after = residentKB()
            print(String(format: "history memory: %d devices x %d messages of %d bytes: %.1f KiB per device (resident, incl. the messages), %.1f KiB counted by the budget",
                         devices, messages, size, Double(after - before) / Double(devices), Double(counted) / 1024 / Double(devices)))
            withExtendedLifetime(histories) {}
        }

        func residentKB() -> Int {
            let status = (try? String(contentsOfFile: "/proc/self/status", encoding: .utf8)) ?? ""
            let line = status.split(separator: "\n").first { $0.hasPrefix("VmRSS:") } ?? ""
            return Int(line.split(separator: " ").dropFirst().first ?? "0") ?? 0
        }
    }

    struct RobotLeg: ParsableCommand {
        static let configuration = CommandConfiguration(
            commandName: "robot-leg",
            abstract: "Connect as the robots of the first devices and answer every http_request at once (the robot side of HTTP to the robot, without a bridge).",
            discussion: "Answers {\"type\":\"http_response\",\"id\":ID,\"status\":200,\"headers\":{\"content-type\":\"application/json\"},\"body\":\"{\\\"ok\\\":true}\" (base64)}. Runs until killed or --seconds pass.")
        @Option var port: Int
        @Option var tokens: String
        @Option var devices: Int = 1
        @Option var seconds: Double = 3600

        func run() throws {
            let creds = try String(contentsOfFile: tokens, encoding: .utf8).split(separator: "\n").dropFirst()
                .map { $0.split(separator: ",").map(String.init) }
            let engine = LoadEngine(port: port)
            var answered = 0
            let head = Array(#"{"type":"http_response","id":"#.utf8)
            let tail = Array(#","status":200,"headers":{"content-type":"application/json"},"body":"eyJvayI6dHJ1ZX0=","more":false}"#.utf8)
            engine.onMessage = { socket, message in
                guard socket.isRobot, scanStringToken(message, key: "\"type\":") == Array(#""http_request""#.utf8),
                      let id = scanStringToken(message, key: "\"id\":") else { return }
                let reply = head + id + tail
                reply.withUnsafeBufferPointer { engine.send(socket, text: $0) }
                engine.flush(socket)
                answered += 1
            }
            for d in 0..<min(devices, creds.count) {
                guard engine.open(path: "\(WimzProtocol.Path.robotSocket)?device_id=\(creds[d][0])", token: creds[d][1], isRobot: true, device: d) != nil
                else { throw ValidationError("socket() failed") }
            }
            engine.run(for: UInt64(seconds * 1e9))
            print("robot-leg answered \(answered) requests")
        }
    }

    struct Run: ParsableCommand {
        static let configuration = CommandConfiguration(abstract: "Run the load phases against a relay.")
        @Option var port: Int
        @Option var tokens: String
        @Option(name: .customLong("relay-pid"), help: "Relay process id, for RSS per idle socket.") var relayPID: Int32?
        @Option var devices: Int = 100
        @Option var window: Int = 64
        @Option var duration: Double = 10
        @Option var size: Int = 200
        @Option(help: "The robots' event names, comma-separated, sent in turn (bark_detected, dog_detected, treat_dispensed, mode_changed: kept in the timeline; mission_progress: a run's progress, not kept).")
        var event = "mission_progress"
        @Option(help: "Messages/s for the latency phase.") var rate: Int = 20_000
        @Option(name: .customLong("idle-sockets"), help: "Idle app sockets for the memory phase (≤ 15 per provisioned device; capped by RLIMIT_NOFILE).") var idleSockets: Int = 30_000
        @Option(name: .customLong("command-rate"), help: "Commands/s for the command round-trip phase.") var commandRate: Int = 5000
        @Option(help: "Comma-separated: handshakes,fanout,latency,command,idle,idlelatency,storm (storm: SIGTERM to the relay, which scripts/bench.sh restarts, and every socket reconnects)") var phases: String = "handshakes,fanout,latency,command,idle,idlelatency,storm"
        @Flag(help: "The load's apps connect with recover=1 (missed-event recovery): every event reaches them numbered.") var recover = false
        @Option(name: .customLong("first-device"), help: "The load phases use the devices from this one on (the tokens file's order), so runs can keep to devices of their own.") var firstDevice: Int = 0
        @Option(name: .customLong("idle-latency-duration"), help: "Seconds of the latency phase run again with the idle sockets connected (covers a ping round at the default 20 s interval).") var idleLatencyDuration: Double = 25

        func run() throws {
            let lines = try String(contentsOfFile: tokens, encoding: .utf8).split(separator: "\n").dropFirst()
            let all = lines.map { $0.split(separator: ",").map(String.init) }.filter { $0.count == 3 }
            let first = min(max(0, firstDevice), all.count)
            let creds = Array(all[first...] + all[..<first])
            guard creds.count >= devices else { throw ValidationError("tokens file has \(creds.count) devices, need \(devices)") }
            let wanted = Set(phases.split(separator: ",").map(String.init))
            let events = event.split(separator: ",").map(String.init)
            guard !events.isEmpty else { throw ValidationError("--event names no event") }
            print("wimz-bench: \(devices) devices x (1 robot + 1 app\(recover ? " with recover=1" : "")), \(size)-byte events, window \(window), \(duration) s per phase")

            let engine = LoadEngine(port: port)
            // Handshakes: one robot and one app per provisioned device. "Cold" is each token's
            // first use on the freshly started relay; "warm" is the same sockets again after
            // all of them closed. A token the relay does not hold yet is read from the database
            // (in batches) on its first use, so "cold" includes those reads.
            let everyDevice = Array(0..<creds.count)
            let appQuery = recover ? "&recover=1" : ""
            var (robots, apps) = try connectPairs(engine, creds: creds, devices: everyDevice, report: wanted.contains("handshakes") ? "cold" : nil,
                                                  appQuery: appQuery)
            engine.closeAll()
            engine.run(for: 500_000_000)
            (robots, apps) = try connectPairs(engine, creds: creds, devices: everyDevice, report: wanted.contains("handshakes") ? "warm" : nil,
                                              appQuery: appQuery)
            // The load phases use the first `devices` pairs; the others close.
            for s in robots[devices...] + apps[devices...] { engine.close(s) }
            robots = Array(robots[..<devices])
            apps = Array(apps[..<devices])
            engine.run(for: 300_000_000)  // settle: greetings and replays

            let load = LoadPhases(engine: engine, settings: .init(size: size, events: events, window: window, duration: duration, rate: rate,
                                                                  commandRate: commandRate, idleSockets: idleSockets,
                                                                  idleLatencyDuration: idleLatencyDuration, relayPID: relayPID),
                                  creds: creds, robots: robots, apps: apps)
            if wanted.contains("fanout") { load.fanout() }
            if wanted.contains("latency") { load.latency() }
            if wanted.contains("command") { load.commands() }
            if wanted.contains("idle"), let relayPID {
                let idle = load.idle(relayPID: relayPID)
                // The same paced load while every idle socket stays open through its first
                // ping round (10–20 s after connect with per-socket phases).
                if wanted.contains("idlelatency") {
                    load.latency(label: "rate \(rate)/s with \(idle) idle", seconds: idleLatencyDuration)
                }
            }
            if wanted.contains("storm"), let relayPID { load.storm(relayPID: relayPID) }
            engine.closeAll()
        }
    }
}
