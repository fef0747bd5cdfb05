import Testing
@testable import RelayCore

/// Missed-event recovery (docs/protocol.md v1.1): the history ring, the numbered copies, and the
/// hub's greetings for apps that resume — without sockets.
@Suite struct RecoveryTests {
    func text(_ p: Payload) -> String { String(decoding: p.bytes, as: UTF8.self) }

    @Test func seqGoesFirstAndTheRestIsByteForByte() {
        #expect(text(DeviceHistory.numbered(Payload(Array(#" { "type":"event" , "x":1}"#.utf8)), seq: 17)!)
                == #" {"seq":17, "type":"event" , "x":1}"#)
        #expect(text(DeviceHistory.numbered(Payload(Array("{ }".utf8)), seq: 2)!) == #"{"seq":2 }"#)
        #expect(DeviceHistory.numbered(Payload(Array("[1]".utf8)), seq: 1) == nil)
        #expect(DeviceHistory.numbered(Payload(Array("plain".utf8)), seq: 1) == nil)
    }

    @Test func theWritersInsertionMatchesTheRenderingForEveryWidth() {
        let payload = Payload(Array(#"{"a":1}"#.utf8))
        for seq: UInt64 in [1, 9, 10, 99, 100, 12_345, UInt64.max] {
            let numbering = Numbering.of(payload, seq: seq)!
            var written = [UInt8](repeating: 0, count: numbering.insertionCount)
            written.withUnsafeMutableBufferPointer { numbering.writeInsertion(to: $0.baseAddress!) }
            #expect(String(decoding: written, as: UTF8.self) == #""seq":\#(seq),"#)
            #expect(String(decoding: numbering.rendered(payload), as: UTF8.self) == #"{"seq":\#(seq),"a":1}"#)
        }
    }

    @Test func theRingHoldsTheNewestWithinCountAndAge() {
        var limits = DeviceHistory.Limits()
        limits.maxMessages = 4
        limits.maxAge = 1000
        let history = DeviceHistory(epoch: "e1", limits: limits)
        var used = 0
        for i in 1...6 { history.append(Payload(Array("{\"n\":\(i)}".utf8)), now: UInt64(i * 10), used: &used) }
        #expect(history.lastSeq == 6 && history.count == 4)
        #expect(history.messages(after: 2, now: 100)?.map(\.seq) == [3, 4, 5, 6])
        #expect(history.messages(after: 1, now: 100) == nil, "seq 2 was evicted")
        #expect(history.messages(after: 6, now: 100)?.isEmpty == true)
        #expect(history.messages(after: 7, now: 100) == nil, "ahead of the history")
        #expect(history.messages(after: 4, now: 1045)?.map(\.seq) == [5, 6])
        #expect(history.messages(after: 2, now: 1035) == nil, "seq 3 is over the age limit")
        let carried = HistoryHandoff(epoch: "e1", lastSeq: 6, entries: history.snapshot(now: 100))
        #expect(HistoryHandoff(json: carried.json) == carried)
        let restored = DeviceHistory.restore(epoch: "e1", lastSeq: 6, entries: carried.entries, limits: limits, now: 5000, used: &used)
        #expect(restored.messages(after: 2, now: 5000)?.map(\.seq) == [3, 4, 5, 6])
        #expect(restored.append(Payload(Array("{}".utf8)), now: 5001, used: &used) == 7)
    }

    /// Every byte in and out is counted: what the histories hold is what `used` says, and
    /// dropping everything returns it to zero.
    @Test func theHistoryCountsWhatItHolds() {
        var limits = DeviceHistory.Limits()
        limits.maxMessages = 20
        limits.maxAge = 1000
        let history = DeviceHistory(epoch: "e", limits: limits)
        var used = 0
        let payloads = (1...50).map { Payload(Array(String(repeating: "x", count: $0).utf8)) }
        for (i, payload) in payloads.enumerated() { history.append(payload, now: UInt64(i + 1), used: &used) }
        let held = payloads[30...].reduce(0) { $0 + $1.allocatedBytes }
        #expect(history.count == 20 && used == history.bytes && used == held + 20 * DeviceHistory.slotBytes, "the ring grew 8, 16, then 20 slots")
        #expect(history.dropExpired(now: 1040, used: &used) == 9 && history.count == 11)
        history.clear(used: &used)
        #expect(used == 0 && history.bytes == 0 && history.count == 0)
    }

    /// Past the node's budget the least recently resumed devices lose their oldest messages
    /// first: their resume gets recovered:false, a recently resumed device keeps all of its own.
    @Test func theBudgetTakesFromTheLeastRecentlyResumedFirst() throws {
        var limits = DeviceHub.Limits()
        limits.history.maxMessages = 100
        limits.historyMemory = 40_000
        let hub = DeviceHub(limits: limits, clock: ManualClock(wall: UnixTime(seconds: 100)).clock)
        let transport = RecordingTransport()
        var next: UInt64 = 0
        func session(_ role: Role, _ device: Int, _ recovery: RecoveryRequest?) -> Session {
            next += 1
            let s = Session(id: next, role: role, deviceID: DeviceID("d\(device)")!, tokenID: Int64(next), tokenExpiresAt: nil,
                            remoteAddress: "", connectedAt: .now(), now: 0, queue: SendQueue(maxMessages: 10_000, maxBytes: 1 << 24))
            s.transport = transport
            s.recovery = recovery
            hub.attach(s, now: 0, wallClock: UnixTime(seconds: 100))
            return s
        }
        func drain(_ s: Session) -> [String] {
            var out: [String] = []
            while let p = s.queue.popFirst() { out.append(String(decoding: p.bytes, as: UTF8.self)) }
            return out
        }
        let robots = (0..<3).map { session(.robot, $0, nil) }
        // d0 resumed (connected with recovery) first, d2 last.
        let epochs = (0..<3).map { d in status(drain(session(.app, d, .fresh))[0])!.epoch }
        let event = #"{"type":"event","event":"bark_detected","data":{"pad":""# + String(repeating: "p", count: 400) + #""}}"#
        // 30 events of ~500 bytes per device: ~45 KB held in all, over the 40 KB budget.
        for d in 0..<3 { for _ in 0..<30 { hub.receive(Payload(Array(event.utf8)), from: robots[d], now: 10) } }
        #expect(hub.historyMemory.used <= 40_000 && hub.historyMemory.evictions > 0)
        func recovered(_ d: Int) -> Bool? { status(drain(session(.app, d, .resume(epoch: epochs[d], seq: 0)))[0])?.recovered }
        #expect(recovered(0) == false, "the least recently resumed device lost its oldest messages")
        #expect(recovered(2) == true, "the most recently resumed one kept everything")
    }

    @Test func sinceAndRecoverAreReadStrictly() throws {
        #expect(try RecoveryRequest.parse(recover: nil, since: nil) == nil)
        #expect(try RecoveryRequest.parse(recover: "1", since: nil) == .fresh)
        #expect(try RecoveryRequest.parse(recover: nil, since: "ab12-_:42") == .resume(epoch: "ab12-_", seq: 42))
        for bad in ["x", "e:", ":1", "e:1:2", "e:-1", "e/x:1", String(repeating: "e", count: 33) + ":1"] {
            #expect(throws: RelayError.self) { try RecoveryRequest.parse(recover: nil, since: bad) }
        }
        #expect(throws: RelayError.self) { try RecoveryRequest.parse(recover: "yes", since: nil) }
    }

    final class Harness {
        let hub: DeviceHub
        var next: UInt64 = 0
        let transport = RecordingTransport()
        let robot: Session
        init(messages: Int = 256, clustered: Bool = false) {
            var limits = DeviceHub.Limits()
            limits.replayEvents = ["mode_changed"]
            limits.history.maxMessages = messages
            hub = DeviceHub(limits: limits, clock: ManualClock(wall: UnixTime(seconds: 100)).clock)
            hub.clustered = clustered
            robot = Session(id: 0, role: .robot, deviceID: DeviceID("d1")!, tokenID: 0, tokenExpiresAt: nil,
                            remoteAddress: "", connectedAt: .now(), now: 0, queue: SendQueue(maxMessages: 10_000, maxBytes: 1 << 24))
            robot.transport = transport
            hub.attach(robot, now: 0, wallClock: UnixTime(seconds: 100))
        }
        func app(_ recovery: RecoveryRequest?, now: UInt64 = 0) -> Session {
            next += 1
            let s = Session(id: next, role: .app, deviceID: DeviceID("d1")!, tokenID: Int64(next), tokenExpiresAt: nil,
                            remoteAddress: "", connectedAt: .now(), now: 0, queue: SendQueue(maxMessages: 10_000, maxBytes: 1 << 24))
            s.transport = transport
            s.recovery = recovery
            hub.attach(s, now: now, wallClock: UnixTime(seconds: 100))
            return s
        }
        func send(_ text: String, now: UInt64 = 0) { hub.receive(Payload(Array(text.utf8)), from: robot, now: now) }
        func drain(_ s: Session) -> [String] {
            var out: [String] = []
            while let p = s.queue.popFirst() { out.append(String(decoding: p.bytes, as: UTF8.self)) }
            return out
        }
    }

    func status(_ line: String) -> (epoch: String, seq: Int, recovered: Bool?)? {
        guard line.contains("device_status"), let e = line.range(of: #""epoch":""#) else { return nil }
        let epoch = line[e.upperBound...].prefix { $0 != "\"" }
        let seq = Int(line[line.range(of: #""seq":"#)!.upperBound...].prefix { $0.isNumber })!
        let recovered: Bool? = line.contains(#""recovered":true"#) ? true : line.contains(#""recovered":false"#) ? false : nil
        return (String(epoch), seq, recovered)
    }

    @Test func aDroppedAppResumesWithExactlyWhatItMissedThenLive() {
        let h = Harness()
        let plain = h.app(nil)
        let first = h.app(.fresh)
        let greeting = h.drain(first)
        let (epoch, seq, recovered) = status(greeting[0])!
        #expect(seq == 0 && recovered == nil)
        h.send(#"{"type":"event","event":"bark_detected","data":{"n":0}}"#)
        #expect(h.drain(first) == [#"{"seq":1,"type":"event","event":"bark_detected","data":{"n":0}}"#])
        h.hub.detach(first)
        for n in 1...50 { h.send(#"{"type":"event","event":"bark_detected","data":{"n":\#(n)}}"#) }
        h.send("not json")  // not numbered, not in the history
        let back = h.app(.resume(epoch: epoch, seq: 1))
        let got = h.drain(back)
        #expect(status(got[0])! == (epoch, 51, true))
        #expect(got.count == 51)
        #expect(got[1...].enumerated().allSatisfy { i, line in line.hasPrefix(#"{"seq":\#(i + 2),"#) && line.contains(#""n":\#(i + 1)}"#) })
        h.send(#"{"type":"event","event":"treat_dispensed","data":{}}"#)
        #expect(h.drain(back) == [#"{"seq":52,"type":"event","event":"treat_dispensed","data":{}}"#])
        // The v1 app saw every message as the robot sent it.
        let v1 = h.drain(plain).filter { !$0.contains("device_status") }
        #expect(v1.first == #"{"type":"event","event":"bark_detected","data":{"n":0}}"# && v1.contains("not json") && !v1.joined().contains("\"seq\""))
    }

    @Test func overTheBufferOrAnotherEpochTheAppGetsTheReplay() {
        let h = Harness(messages: 8)
        let app = h.app(.fresh)
        let epoch = status(h.drain(app)[0])!.epoch
        h.hub.detach(app)
        h.send(#"{"type":"event","event":"mode_changed","data":{"mode":"coach"}}"#)
        for n in 1...20 { h.send(#"{"type":"event","event":"bark_detected","data":{"n":\#(n)}}"#) }
        let back = h.app(.resume(epoch: epoch, seq: 0))
        let got = h.drain(back)
        #expect(status(got[0])! == (epoch, 21, false))
        #expect(got.dropFirst() == [#"{"seq":1,"type":"event","event":"mode_changed","data":{"mode":"coach"}}"#], "the v1 replay, numbered")
        let stranger = h.app(.resume(epoch: "other", seq: 3))
        #expect(status(h.drain(stranger)[0])!.recovered == false)
    }

    @Test func aResumeFromAnotherNodeWaitsForTheHandOffOrGivesUp() {
        let h = Harness(clustered: true)
        let plain = h.app(nil)
        _ = h.drain(plain)
        let parked = h.app(.resume(epoch: "n1epoch", seq: 3), now: 0)
        #expect(h.drain(parked).isEmpty, "nothing until the hand-off")
        h.send(#"{"type":"event","event":"bark_detected","data":{"n":6}}"#, now: 10)
        #expect(h.drain(plain).isEmpty, "held while a resume waits, so numbering stays one sequence")
        let carried = HistoryHandoff(epoch: "n1epoch", lastSeq: 5, entries: (1...5).map { n in
            (UInt64(n), 0, Array(#"{"type":"event","event":"bark_detected","data":{"n":\#(n)}}"#.utf8))
        })
        h.hub.adoptHandoff(DeviceID("d1")!, since: .now(), robotOnline: true, replay: [], history: carried, now: 20, wallClock: UnixTime(seconds: 100))
        let got = h.drain(parked)
        #expect(status(got[0])! == ("n1epoch", 6, true))
        #expect(got.dropFirst().map { String($0.prefix(9)) } == [#"{"seq":4,"#, #"{"seq":5,"#, #"{"seq":6,"#])
        #expect(h.drain(plain) == [#"{"type":"event","event":"bark_detected","data":{"n":6}}"#])
        // No hand-off at all (the node crashed): after the wait, a new epoch and recovered:false.
        let h2 = Harness(clustered: true)
        let lost = h2.app(.resume(epoch: "gone", seq: 9), now: 0)
        h2.hub.expireParked(now: 1_000_000_000)
        #expect(h2.drain(lost).isEmpty)
        h2.hub.expireParked(now: 2_000_000_000)
        let greeting = status(h2.drain(lost)[0])!
        #expect(greeting.recovered == false && greeting.epoch != "gone" && greeting.seq == 0)
    }
}
