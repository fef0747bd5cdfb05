import ArgumentParser
import Foundation
import RelayCore
import RelayStore

/// `wimz-bench`: loopback benchmark of a running wimz-relay (see scripts/bench.sh, which
/// provisions a private database, starts the relay and calls this).
@main
struct WimzBench: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "wimz-bench",
        abstract: "Benchmark a wimz-relay over loopback: fan-out, latency, handshakes, idle memory.",
        subcommands: [Provision.self, Run.self, Stalls.self, RobotLeg.self, HistoryMemory.self, MetricsCost.self])

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
                guard engine.open(path: "/ws/robot?device_id=\(creds[d][0])", token: creds[d][1], isRobot: true, device: d) != nil
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
            print("wimz-bench: \(devices) devices x (1 robot + 1 app\(recover ? " with recover=1" : "")), \(size)-byte events, window \(window), \(duration) s per phase")

            let engine = LoadEngine(port: port)
            // Handshakes: one robot and one app per provisioned device. "Cold" is each token's
            // first use on the freshly started relay; "warm" is the same sockets again after
            // all of them closed. The relay never asks the database during a handshake (tokens
            // are mirrored in memory), so the two differ only in what is already in the caches.
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

            // Event template padded to `size` bytes; seq and t are written per message.
            func event(seq: UInt64, t: UInt64) -> [UInt8] {
                let head = #"{"type":"event","event":"mission_progress","data":{"n":\#(seq),"t":\#(t),"pad":""#
                let tail = #""}}"#
                let pad = max(0, size - head.utf8.count - tail.utf8.count)
                return Array(head.utf8) + [UInt8](repeating: UInt8(ascii: "x"), count: pad) + Array(tail.utf8)
            }
            var commandLatencies: [UInt32] = []
            var commandMode = false
            engine.onMessage = { socket, payload in
                if commandMode {
                    if socket.isRobot {
                        // Echo as the robot stack does: the id token verbatim, plus the app's t.
                        guard let id = scanStringToken(payload, key: "\"id\":"), let t = scanNumber(payload, key: "\"t\":") else { return }
                        let reply = Array(#"{"type":"response","id":"#.utf8) + id + Array(#","t":\#(t)}"#.utf8)
                        reply.withUnsafeBufferPointer { engine.send(socket, text: $0) }
                        engine.flush(socket)
                    } else if engine.measuring, let t = scanNumber(payload, key: "\"t\":"),
                              scanStringToken(payload, key: "\"type\":") == Array("\"response\"".utf8) {
                        commandLatencies.append(UInt32(clamping: monotonicNanos() &- t))
                    }
                    return
                }
                guard !socket.isRobot, let seq = scanNumber(payload, key: "\"n\":"), let t = scanNumber(payload, key: "\"t\":") else { return }
                socket.lastSeen = max(socket.lastSeen, seq)
                if engine.measuring {
                    engine.received += 1
                    let latency = monotonicNanos() &- t
                    engine.latenciesNanos.append(UInt32(clamping: latency))
                }
            }
            func sendEvent(_ r: LoadSocket) {
                r.seq += 1
                let bytes = event(seq: r.seq, t: monotonicNanos())
                bytes.withUnsafeBufferPointer { engine.send(r, text: $0) }
            }
            func measure(_ label: String, seconds: Double? = nil, tick: @escaping () -> Void) {
                engine.received = 0
                engine.latenciesNanos.removeAll(keepingCapacity: true)
                engine.measuring = true
                let start = monotonicNanos()
                let cpuBefore = relayPID.map(cpuSeconds)
                // Where each 5 s slice of the phase begins in the samples: a slow stretch (a
                // burst of work in the relay, or of the database on the load's core) shows
                // as one slice's tail rather than disappearing in the whole phase's.
                var sliceStarts = [0]
                engine.run(for: UInt64((seconds ?? duration) * 1e9), tick: {
                    if monotonicNanos() - start >= UInt64(sliceStarts.count) * 5_000_000_000 {
                        sliceStarts.append(engine.latenciesNanos.count)
                    }
                    tick()
                })
                let elapsed = Double(monotonicNanos() - start) / 1e9
                // The relay's CPU share over the phase: what idle sockets cost shows here even
                // when the machine's stalls hide it in the latency tail.
                var cpu = ""
                if let relayPID, let cpuBefore {
                    cpu = String(format: "  relay CPU %.1f %%", (cpuSeconds(relayPID) - cpuBefore) / elapsed * 100)
                }
                engine.measuring = false
                engine.run(for: 500_000_000)  // drain
                let l = engine.latenciesNanos.sorted()
                print(String(format: "%@ %.0f msgs/s delivered  one-way latency p50 %.0f us  p90 %.0f us  p99 %.0f us  p99.9 %.0f us  (n=%d)%@",
                             label, Double(engine.received) / elapsed, Double(percentile(l, 0.5)) / 1e3, Double(percentile(l, 0.9)) / 1e3,
                             Double(percentile(l, 0.99)) / 1e3, Double(percentile(l, 0.999)) / 1e3, l.count, cpu))
                if sliceStarts.count > 2 {
                    let bounds = sliceStarts + [engine.latenciesNanos.count]
                    let slices = zip(bounds, bounds.dropFirst()).map { from, to -> String in
                        let slice = engine.latenciesNanos[from..<to].sorted()
                        return String(format: "%.0f/%.0f", Double(percentile(slice, 0.5)) / 1e3, Double(percentile(slice, 0.99)) / 1e3)
                    }
                    print("  p50/p99 us by 5 s: " + slices.joined(separator: "  "))
                }
            }
            if wanted.contains("fanout") {
                measure("fanout window \(window)") {
                    for (r, a) in zip(robots, apps) where r.state == .open {
                        var queued = false
                        while r.seq - a.lastSeen < UInt64(window) {
                            sendEvent(r)
                            queued = true
                        }
                        if queued { engine.flush(r) }
                    }
                }
            }
            if wanted.contains("latency") {
                var pacer = Pacer(rate: rate)
                measure("rate \(rate)/s       ") {
                    while let n = pacer.next() {
                        let r = robots[n % robots.count]
                        sendEvent(r)
                        engine.flush(r)
                    }
                }
            }
            if wanted.contains("command") {
                commandMode = true
                var pacer = Pacer(rate: commandRate)
                engine.measuring = true
                commandLatencies.removeAll()
                let begin = monotonicNanos()
                engine.run(for: UInt64(duration * 1e9), tick: {
                    while let n = pacer.next() {
                        let a = apps[n % apps.count]
                        let command = Array(#"{"type":"command","id":"\#(n + 1)","command":"ping","t":\#(monotonicNanos())}"#.utf8)
                        command.withUnsafeBufferPointer { engine.send(a, text: $0) }
                        engine.flush(a)
                    }
                })
                let elapsed = Double(monotonicNanos() - begin) / 1e9
                engine.measuring = false
                engine.run(for: 500_000_000)
                commandMode = false
                let l = commandLatencies.sorted()
                print(String(format: "command rate %d/s  %.0f round trips/s  p50 %.0f us  p99 %.0f us  (n=%d of %d sent)",
                             commandRate, Double(l.count) / elapsed, Double(percentile(l, 0.5)) / 1e3,
                             Double(percentile(l, 0.99)) / 1e3, l.count, pacer.sent))
            }
            if wanted.contains("idle"), let relayPID {
                // Each socket is one descriptor here and one in the relay; both processes live
                // under the same hard RLIMIT_NOFILE, which may cap the count below the request.
                let limit = raiseDescriptorLimit()
                let room = limit - engine.sockets.count - 64
                // On the devices the load phases do not use, so the idle sockets stay idle (no
                // fan-out to them) and the latency phase below measures the same load as before.
                let idleDevices = max(creds.count - devices, 1)
                let capacity = idleDevices * 15  // apps per device, under the default cap of 16
                let wantedSockets = min(idleSockets, room, capacity)
                engine.run(for: 1_000_000_000)
                let before = rssKB(relayPID)
                let base = engine.handshakeTimes.count + engine.handshakeFailures
                var opened = 0
                while true {
                    let done = engine.handshakeTimes.count + engine.handshakeFailures - base
                    while opened < wantedSockets, opened - done < 256 {
                        let d = (devices + opened % idleDevices) % creds.count
                        _ = engine.open(path: "/ws/app?device_id=\(creds[d][0])", token: creds[d][2], isRobot: false, device: d)
                        opened += 1
                    }
                    if done >= opened { break }
                    engine.run(for: 1_000_000)
                }
                engine.run(for: 2_000_000_000)
                let after = rssKB(relayPID)
                let ok = engine.handshakeTimes.count - base
                var cap = ""
                if wantedSockets < idleSockets {
                    cap = wantedSockets == capacity ? " (capped: \(idleDevices) idle devices x 15 apps)"
                        : " (capped by RLIMIT_NOFILE \(limit) of this process and the relay)"
                }
                print(String(format: "idle sockets    %d of %d requested%@, relay RSS %d -> %d kB = %.0f bytes per socket",
                             ok, idleSockets, cap, before, after, Double(after - before) * 1024 / Double(max(ok, 1))))
                if wanted.contains("idlelatency") {
                    // The same paced load while every idle socket stays open through its first
                    // ping round (10–20 s after connect with per-socket phases).
                    var pacer = Pacer(rate: rate)
                    measure("rate \(rate)/s with \(ok) idle", seconds: idleLatencyDuration) {
                        while let n = pacer.next() {
                            let r = robots[n % robots.count]
                            sendEvent(r)
                            engine.flush(r)
                        }
                    }
                }
            }
            if wanted.contains("storm"), let relayPID {
                // Every open socket (robots, apps, idle ones) loses the relay at once and comes
                // back: how long until all are authenticated again, and what they were told.
                let targets = engine.sockets.values.filter { $0.state == .open }
                    .map { (path: $0.path, token: $0.token, isRobot: $0.isRobot, device: $0.device) }
                engine.refusals.removeAll()
                let base = engine.handshakeTimes.count
                let start = monotonicNanos()
                kill(relayPID, SIGTERM)
                engine.run(for: 3_000_000_000, until: { engine.sockets.values.allSatisfy { $0.state != .open } })
                var waiting = Array(targets.indices)
                var live: [Int32: Int] = [:]  // socket → target index
                var attempts = 0
                var firstBack: UInt64?
                while !waiting.isEmpty || !live.isEmpty, monotonicNanos() - start < 60_000_000_000 {
                    if firstBack == nil, engine.handshakeTimes.count > base { firstBack = monotonicNanos() }
                    while live.count < 512, let index = waiting.popLast() {
                        let t = targets[index]
                        if let s = engine.open(path: t.path, token: t.token, isRobot: t.isRobot, device: t.device) {
                            live[s.fd] = index
                            attempts += 1
                        } else {
                            waiting.append(index)
                            break
                        }
                    }
                    engine.run(for: 2_000_000)
                    for (fd, index) in live {
                        guard let s = engine.sockets[fd], s.state != .closed else {
                            live[fd] = nil
                            waiting.insert(index, at: 0)  // refused or failed: again, after the others
                            continue
                        }
                        if s.state == .open { live[fd] = nil }
                    }
                }
                let elapsed = Double(monotonicNanos() - start) / 1e9
                let back = engine.handshakeTimes.count - base
                let told = engine.refusals.sorted { $0.key < $1.key }.map { "\($0.key): \($0.value)" }
                let first = Double((firstBack ?? monotonicNanos()) - start) / 1e9
                print(String(format: "storm           %d of %d sockets authenticated again %.2f s after SIGTERM (restart included; the first after %.2f s), %d attempts, refusals: %@",
                             back, targets.count, elapsed, first, attempts, told.isEmpty ? "none" : told.joined(separator: ", ")))
            }
            engine.closeAll()
        }
    }
}
