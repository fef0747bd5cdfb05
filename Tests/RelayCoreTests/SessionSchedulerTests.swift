import Testing
@testable import RelayCore

/// The tick's work is what is due, not every session; pings keep a phase spread at connect.
@Suite struct SessionSchedulerTests {
    let second: UInt64 = 1_000_000_000
    let origin: UInt64 = 1_000 * 1_000_000_000

    func attached(_ id: UInt64, _ hub: DeviceHub, now: UInt64) -> Session {
        let s = Session(id: id, role: .app, deviceID: DeviceID("d\(id % 7)")!, tokenID: Int64(id), tokenExpiresAt: nil,
                        remoteAddress: "127.0.0.1", connectedAt: .now(), now: now, queue: SendQueue(maxMessages: 8, maxBytes: 1 << 16))
        hub.attach(s, now: now, wallClock: UnixTime(seconds: 100))
        return s
    }

    @Test func onlyDueSessionsComeBackEachOnce() {
        let hub = DeviceHub(limits: { var l = DeviceHub.Limits(); l.maxAppsPerDevice = 10_000; return l }(), clock: .system)
        let wheel = SessionScheduler(now: origin, slotWidth: 1_000_000_000, slotCount: 64)
        let sessions = (1...1_000).map { attached(UInt64($0), hub, now: origin) }
        for (i, s) in sessions.enumerated() { wheel.schedule(s, at: origin + UInt64(i % 20) * second) }
        var seen: [UInt64: Int] = [:]
        for t in 0..<20 {
            let due = wheel.due(now: origin + UInt64(t) * second + second / 2)
            #expect(due.count == 50, "tick \(t)")  // 1,000 spread over 20 s: 50 a tick, not 1,000
            for s in due { seen[s.id, default: 0] += 1 }
        }
        #expect(seen.count == 1_000 && seen.values.allSatisfy { $0 == 1 })
        #expect(wheel.due(now: origin + 100 * second).isEmpty)
        for s in sessions { hub.detach(s) }  // a session and its device entry refer to each other until then
    }

    @Test func aFineWheelSpreadsWithinTheSecond() {
        let hub = DeviceHub(limits: { var l = DeviceHub.Limits(); l.maxAppsPerDevice = 10_000; return l }(), clock: .system)
        let ms: UInt64 = 1_000_000
        let wheel = SessionScheduler(now: origin, slotWidth: 10 * ms, slotCount: 2048)
        let sessions = (1...1_000).map { attached(UInt64($0), hub, now: origin) }
        // Pings due 20 s out, spread over one second: each 10 ms turn hands out ~10, not 1,000 at once.
        for (i, s) in sessions.enumerated() { wheel.schedule(s, at: origin + 20 * second + UInt64(i) * ms) }
        #expect(wheel.due(now: origin + 20 * second - ms).isEmpty)
        var largest = 0, total = 0
        for turn in 0...100 {
            let due = wheel.due(now: origin + 20 * second + UInt64(turn) * 10 * ms)
            largest = max(largest, due.count)
            total += due.count
        }
        #expect(total == 1_000 && largest <= 10)
        for s in sessions { hub.detach(s) }
    }

    @Test func reschedulingAndLeavingTheHubDropTheOldEntry() {
        let hub = DeviceHub(limits: .init(), clock: .system)
        let wheel = SessionScheduler(now: origin, slotWidth: 1_000_000_000, slotCount: 64)
        let moved = attached(1, hub, now: origin)
        let gone = attached(2, hub, now: origin)
        wheel.schedule(moved, at: origin + 2 * second)
        wheel.schedule(moved, at: origin + 5 * second)  // the earlier entry is stale now
        wheel.schedule(gone, at: origin + 2 * second)
        hub.detach(gone)
        #expect(wheel.due(now: origin + 3 * second).isEmpty)
        #expect(wheel.due(now: origin + 5 * second).map(\.id) == [1])
        #expect(wheel.entryCount == 0)
        hub.detach(moved)
    }

    @Test func farEntriesWaitForTheirRoundAndAStallCatchesUp() {
        let hub = DeviceHub(limits: .init(), clock: .system)
        let wheel = SessionScheduler(now: origin, slotWidth: 1_000_000_000, slotCount: 64)
        let far = attached(1, hub, now: origin)
        let near = attached(2, hub, now: origin)
        wheel.schedule(far, at: origin + 200 * second)  // three revolutions ahead
        wheel.schedule(near, at: origin + 3 * second)
        #expect(wheel.due(now: origin + 10 * second).map(\.id) == [2])
        #expect(wheel.due(now: origin + 199 * second).isEmpty)
        #expect(wheel.due(now: origin + 400 * second).map(\.id) == [1])  // one pass after a long stall
        // Never at a tick already handed out: "now" in the past lands on the next tick.
        wheel.schedule(near, at: origin)
        #expect(wheel.due(now: origin + 400 * second).isEmpty)
        #expect(wheel.due(now: origin + 401 * second).map(\.id) == [2])
        hub.detach(far)
        hub.detach(near)
    }

    @Test func keepalivePingsOnPhaseSkipsBusySocketsAndTimesOutSilentOnes() {
        let interval = 20 * second
        let policy = KeepalivePolicy(interval: interval)
        let s = Session(id: 1, role: .app, deviceID: DeviceID("d")!, tokenID: 1, tokenExpiresAt: nil, remoteAddress: "",
                        connectedAt: .now(), now: origin, queue: SendQueue(maxMessages: 1, maxBytes: 1))
        s.nextPingAt = policy.firstPing(now: origin, fraction: 0.5)
        #expect(s.nextPingAt == origin + 15 * second)  // between interval/2 and interval
        #expect(policy.check(s, now: origin + 14 * second) == .nothing)
        #expect(policy.check(s, now: origin + 15 * second) == .ping)
        #expect(s.nextPingAt == origin + 35 * second)  // same phase, one interval on
        s.lastHeard = origin + 34 * second             // busy socket: no ping needed this round
        #expect(policy.check(s, now: origin + 35 * second) == .nothing)
        #expect(policy.nextCheck(s) == origin + 55 * second)
        #expect(policy.check(s, now: origin + 74 * second) == .timeout)  // 40 s silent
        // Phases spread: a fleet connecting together gets pings over half an interval.
        let phases = Set((0..<100).map { policy.firstPing(now: origin, fraction: Double($0) / 99) / second })
        #expect(phases.count == 11 && phases.min() == 1_010 && phases.max() == 1_020)
    }
}

extension SessionScheduler {
    /// Entries held, live and stale.
    var entryCount: Int { slots.reduce(0) { $0 + $1.count } }
}
