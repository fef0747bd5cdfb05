import Testing
import WimzProtocol
@testable import RelayCore

@Suite struct PushPlannerTests {
    let second: UInt64 = 1_000_000_000

    func message(_ kind: PushKind = .barkDetected, token: String = "aa", seq: UInt64 = 0) -> PushMessage {
        PushMessage(token: token, environment: .sandbox, device: DeviceID("d1")!, kind: kind, count: 0, epoch: "e", seq: seq,
                    locArgs: ["Rex"])
    }

    @Test func oneWindowPerRegistrationAndKindAndTheCountsAddUp() {
        var planner = PushPlanner(interval: 60 * second)
        var sent: [PushMessage] = []
        var events = 0
        for t in stride(from: UInt64(0), to: 200, by: 7) {  // a bark every 7 s for 200 s
            events += 1
            if let push = planner.event(message(seq: t), now: t * second) { sent.append(push) }
            sent += planner.expire(now: t * second)
        }
        sent += planner.expire(now: 1_000 * second)
        sent += planner.expire(now: 2_000 * second)
        #expect(sent.map(\.count).reduce(0, +) == events, "every event in exactly one push")
        #expect(sent.count <= 200 / 60 + 2, "at most one push per window: \(sent.map(\.count))")
        #expect(sent.first?.count == 1 && sent.allSatisfy { $0.count >= 1 })
        #expect(sent.last?.seq == 196, "a trailing push carries its latest event's place")
        #expect(planner.openWindows == 0)
    }

    @Test func kindsAndTokensHaveWindowsOfTheirOwn() {
        var planner = PushPlanner(interval: 60 * second)
        #expect(planner.event(message(.barkDetected), now: 0)?.count == 1)
        #expect(planner.event(message(.treatDispensed), now: 0)?.count == 1)
        #expect(planner.event(message(.barkDetected, token: "bb"), now: 0)?.count == 1)
        #expect(planner.event(message(.barkDetected), now: second) == nil)
        #expect(planner.flush().map(\.count) == [1])
    }

    @Test func anEventAfterAWindowClosedUnnoticedCarriesItsCount() {
        var planner = PushPlanner(interval: 60 * second)
        _ = planner.event(message(), now: 0)
        _ = planner.event(message(), now: second)
        _ = planner.event(message(), now: 2 * second)
        // No expire() ran; the next event comes after the window closed.
        #expect(planner.event(message(), now: 61 * second)?.count == 3)
        #expect(planner.expire(now: 200 * second).isEmpty)
    }

    @Test func forgettingDropsWhatWasCounted() {
        var planner = PushPlanner(interval: 60 * second)
        _ = planner.event(message(), now: 0)
        _ = planner.event(message(), now: second)
        planner.forget(token: "aa", device: DeviceID("d1")!)
        #expect(planner.expire(now: 100 * second).isEmpty && planner.openWindows == 0)
    }

    @Test func theBodyIsTheContractsShape() {
        var push = message(.treatDispensed)
        push.count = 3
        push.locArgs = ["Rex", "4", "10"]
        let body = String(decoding: push.body, as: UTF8.self)
        #expect(body == #"{"aps":{"alert":{"loc-key":"WIMZ_TREAT_DISPENSED","loc-args":["Rex","4","10"]},"sound":"default","thread-id":"d1","mutable-content":1},"wimz":{"device_id":"d1","event":"treat_dispensed","count":3,"epoch":"e","seq":0}}"#)
        let offline = PushMessage(token: "aa", environment: .production, device: DeviceID("d1")!, kind: .robotOffline, count: 1)
        #expect(String(decoding: offline.body, as: UTF8.self).hasSuffix(#""wimz":{"device_id":"d1","event":"robot_offline","count":1}}"#))
    }
}
