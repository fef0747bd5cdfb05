import Foundation
import WimzProtocol

/// The load phases of `wimz-bench run` over one set of connected robots and apps (the first
/// `robots.count` devices of the tokens file): each phase prints its figures.
final class LoadPhases {
    /// What `wimz-bench run` was told.
    struct Settings {
        var size: Int
        /// The robot's events' names, taken in turn (`mission_progress` as mid-run progress, its
        /// status first in `data` as the robot library sends it: one the timeline does not keep;
        /// `bark_detected` and the rest of the timeline's set: kept).
        var events: [String]
        var window: Int
        var duration: Double
        var rate: Int
        var commandRate: Int
        var idleSockets: Int
        var idleLatencyDuration: Double
        var relayPID: Int32?
    }

    private let engine: LoadEngine
    private let settings: Settings
    /// Every provisioned device: id, robot token, app token.
    private let creds: [[String]]
    private let robots: [LoadSocket]
    private let apps: [LoadSocket]
    private var commandLatencies: [UInt32] = []
    /// Commands and their answers, rather than events, are what the sockets receive.
    private var commandMode = false

    init(engine: LoadEngine, settings: Settings, creds: [[String]], robots: [LoadSocket], apps: [LoadSocket]) {
        self.engine = engine
        self.settings = settings
        self.creds = creds
        self.robots = robots
        self.apps = apps
        engine.onMessage = { [unowned self] socket, payload in received(payload, on: socket) }
    }

    /// An event template padded to `size` bytes; seq and t are written per message.
    private func event(seq: UInt64, t: UInt64) -> [UInt8] {
        let name = settings.events[Int(seq % UInt64(settings.events.count))]
        let status = name == "mission_progress" ? #""status":"watching","# : ""
        let head = #"{"type":"event","event":"\#(name)","data":{\#(status)"n":\#(seq),"t":\#(t),"pad":""#
        let tail = #""}}"#
        let pad = max(0, settings.size - head.utf8.count - tail.utf8.count)
        return Array(head.utf8) + [UInt8](repeating: UInt8(ascii: "x"), count: pad) + Array(tail.utf8)
    }

    private func received(_ payload: UnsafeBufferPointer<UInt8>, on socket: LoadSocket) {
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

    private func sendEvent(_ r: LoadSocket) {
        r.seq += 1
        let bytes = event(seq: r.seq, t: monotonicNanos())
        bytes.withUnsafeBufferPointer { engine.send(r, text: $0) }
    }

    /// Runs `tick` for the phase's seconds and prints delivery, latency and the relay's CPU.
    private func measure(_ label: String, seconds: Double? = nil, tick: @escaping () -> Void) {
        engine.received = 0
        engine.latenciesNanos.removeAll(keepingCapacity: true)
        engine.measuring = true
        let start = monotonicNanos()
        let cpuBefore = settings.relayPID.map(cpuSeconds)
        // Where each 5 s slice of the phase begins in the samples: a slow stretch (a
        // burst of work in the relay, or of the database on the load's core) shows
        // as one slice's tail rather than disappearing in the whole phase's.
        var sliceStarts = [0]
        engine.run(for: UInt64((seconds ?? settings.duration) * 1e9), tick: { [engine] in
            if monotonicNanos() - start >= UInt64(sliceStarts.count) * 5_000_000_000 {
                sliceStarts.append(engine.latenciesNanos.count)
            }
            tick()
        })
        let elapsed = Double(monotonicNanos() - start) / 1e9
        // The relay's CPU share over the phase: what idle sockets cost shows here even
        // when the machine's stalls hide it in the latency tail.
        var cpu = ""
        if let relayPID = settings.relayPID, let cpuBefore {
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

    /// Each robot keeps `window` events ahead of its app.
    func fanout() {
        measure("fanout window \(settings.window)") { [self] in
            for (r, a) in zip(robots, apps) where r.state == .open {
                var queued = false
                while r.seq - a.lastSeen < UInt64(settings.window) {
                    sendEvent(r)
                    queued = true
                }
                if queued { engine.flush(r) }
            }
        }
    }

    /// Events paced at `rate` a second over the robots (`seconds`: the phase's length).
    func latency(label: String? = nil, seconds: Double? = nil) {
        var pacer = Pacer(rate: settings.rate)
        measure(label ?? "rate \(settings.rate)/s       ", seconds: seconds) { [self] in
            while let n = pacer.next() {
                let r = robots[n % robots.count]
                sendEvent(r)
                engine.flush(r)
            }
        }
    }

    /// Commands paced at `commandRate` a second from the apps, each answered by its robot: round trips.
    func commands() {
        commandMode = true
        var pacer = Pacer(rate: settings.commandRate)
        engine.measuring = true
        commandLatencies.removeAll()
        let begin = monotonicNanos()
        engine.run(for: UInt64(settings.duration * 1e9), tick: { [self] in
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
                     settings.commandRate, Double(l.count) / elapsed, Double(percentile(l, 0.5)) / 1e3,
                     Double(percentile(l, 0.99)) / 1e3, l.count, pacer.sent))
    }

    /// Opens up to `idleSockets` idle app sockets on the devices the load does not use and prints
    /// the relay's memory per socket; how many opened.
    func idle(relayPID: Int32) -> Int {
        // Each socket is one descriptor here and one in the relay; both processes live
        // under the same hard RLIMIT_NOFILE, which may cap the count below the request.
        let limit = raiseDescriptorLimit()
        let room = limit - engine.sockets.count - 64
        // On the devices the load phases do not use, so the idle sockets stay idle (no
        // fan-out to them) and the latency phase after this measures the same load as before.
        let devices = robots.count
        let idleDevices = max(creds.count - devices, 1)
        let capacity = idleDevices * 15  // apps per device, under the default cap of 16
        let wantedSockets = min(settings.idleSockets, room, capacity)
        engine.run(for: 1_000_000_000)
        let before = rssKB(relayPID)
        let base = engine.handshakeTimes.count + engine.handshakeFailures
        var opened = 0
        while true {
            let done = engine.handshakeTimes.count + engine.handshakeFailures - base
            while opened < wantedSockets, opened - done < 256 {
                let d = (devices + opened % idleDevices) % creds.count
                _ = engine.open(path: "\(WimzProtocol.Path.appSocket)?device_id=\(creds[d][0])", token: creds[d][2], isRobot: false, device: d)
                opened += 1
            }
            if done >= opened { break }
            engine.run(for: 1_000_000)
        }
        engine.run(for: 2_000_000_000)
        let after = rssKB(relayPID)
        let ok = engine.handshakeTimes.count - base
        var cap = ""
        if wantedSockets < settings.idleSockets {
            cap = wantedSockets == capacity ? " (capped: \(idleDevices) idle devices x 15 apps)"
                : " (capped by RLIMIT_NOFILE \(limit) of this process and the relay)"
        }
        print(String(format: "idle sockets    %d of %d requested%@, relay RSS %d -> %d kB = %.0f bytes per socket",
                     ok, settings.idleSockets, cap, before, after, Double(after - before) * 1024 / Double(max(ok, 1))))
        return ok
    }

    /// SIGTERM to the relay (which scripts/bench.sh restarts): how long until every open socket
    /// is authenticated again, and what the sockets were told meanwhile.
    func storm(relayPID: Int32) {
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
}
