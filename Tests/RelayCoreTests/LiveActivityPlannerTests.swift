import Testing
import RelayCore
import WimzProtocol

/// docs/protocol.md v1.4 "Update": each rule of `LiveActivityPlanner` with its case.
@Suite struct LiveActivityPlannerTests {
    let key = LiveActivityPlanner.Key(device: DeviceID("robot-1")!, appTokenID: 7, activity: LiveActivityID("a-1")!)
    let second: UInt64 = 1_000_000_000

    @Test func aChangeOfStatusGoesAtOnceAtTenOtherChangesAreCoalescedAtFive() {
        var planner = LiveActivityPlanner(interval: 2 * second, alertsPerHour: 30)
        #expect(planner.decide(key, status: "watching", now: 0) == .sendNow(priority: 10), "the first state is a change of status")
        _ = planner.sent(key, status: "watching", timestamp: 100, priority: 10, now: 0)
        #expect(planner.decide(key, status: "watching", now: second) == .later, "within the interval: coalesced")
        #expect(planner.due(now: second).isEmpty)
        #expect(planner.due(now: 2 * second) == [key], "due once the interval has passed")
        #expect(planner.decide(key, status: "success", now: second) == .sendNow(priority: 10), "a status change never waits")
        _ = planner.sent(key, status: "success", timestamp: 101, priority: 10, now: second)
        #expect(planner.due(now: 10 * second).isEmpty, "what was waiting went with it")
        #expect(planner.decide(key, status: "success", now: 4 * second) == .sendNow(priority: 5), "past the interval: at once, at 5")
    }

    @Test func theHourlyAllowanceOfPriorityTenRunsOutThenRefills() {
        var planner = LiveActivityPlanner(interval: second, alertsPerHour: 2)
        for (k, status) in ["a", "b"].enumerated() {
            #expect(planner.decide(key, status: status, now: UInt64(k) * second) == .sendNow(priority: 10))
            _ = planner.sent(key, status: status, timestamp: 0, priority: 10, now: UInt64(k) * second)
        }
        #expect(planner.decide(key, status: "c", now: 2 * second) == .sendNow(priority: 5), "the third in the hour goes at 5")
        _ = planner.sent(key, status: "c", timestamp: 0, priority: 5, now: 2 * second)
        #expect(planner.decide(key, status: "d", now: 3_601 * second) == .sendNow(priority: 10), "an hour later it is back")
    }

    @Test func timestampsNeverGoBackAndForgettingStartsAfresh() {
        var planner = LiveActivityPlanner(interval: second, alertsPerHour: 30)
        #expect(planner.sent(key, status: "a", timestamp: 200, priority: 10, now: 0) == 200)
        #expect(planner.sent(key, status: "a", timestamp: 150, priority: 5, now: 2 * second) == 200)
        #expect(planner.stamp(key, 190) == 200 && planner.stamp(key, 250) == 250)
        planner.schedule(key, at: 5 * second, now: 3 * second)
        #expect(planner.due(now: 4 * second).isEmpty && planner.due(now: 5 * second) == [key], "a retry or catch-up at its time")
        planner.cancelPending(key)
        #expect(planner.due(now: 9 * second).isEmpty)
        planner.forget(device: key.device)
        #expect(planner.stamp(key, 10) == 10, "forgotten with its device's run")
    }

    @Test func theRequestBodyIsTheContracts() throws {
        let state = MissionState(status: "completed", trick: "sit", dogName: "Rex", robotOnline: true)
        let end = LiveActivityRequest(device: key.device, appTokenID: 7, activity: key.activity, token: "ab", environment: .production,
                                      event: .end, priority: 10, timestamp: 1_000, state: state, ended: .completed)
        let body = try JSONReader.parse(end.body(staleAfter: 120, dismissAfter: 900))
        let aps = try #require(body.member("aps"))
        #expect(aps.member("timestamp") == .int(1_000) && aps.member("stale-date") == .int(1_120) && aps.member("dismissal-date") == .int(1_900))
        #expect(aps.member("event") == .string("end") && aps.member("content-state")?.member("status") == .string("completed"))
        #expect(aps.member("alert")?.member("loc-key") == .string("WIMZ_MISSION_COMPLETED"))
        var away = end
        away.ended = .robotAway
        #expect(try JSONReader.parse(away.body(staleAfter: 120, dismissAfter: 900)).member("aps")?.member("alert") == nil)
        #expect(body.member("wimz")?.member("device_id") == .string("robot-1"))
    }
}
