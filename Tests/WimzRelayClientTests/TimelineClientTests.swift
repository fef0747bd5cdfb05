import Foundation
import Testing
import RelayTestSupport
@testable import WimzRelayClient

/// The household's timeline through the Swift client, against a real relay (docs/protocol.md
/// v1.6): pages both ways as an `AsyncSequence`, a copy kept in a file and synced with only
/// what is new, the notice that says there is more, and the "while you were away" summary made
/// from the copy alone.
@Suite struct TimelineClientTests {
    @Test func pagesACopyInAFileTheNoticeAndTheSummary() async throws {
        let f = try await onThread { try RelayFixture() }
        let robot = try await onThread { try f.robot() }
        let phone = makeClient(f)
        let log = EventLog(phone)
        await phone.start()
        _ = try await log.waitFor(isOnline(true))
        let started = Date()
        try await onThread {
            for k in 0..<7 {
                try robot.send(#"{"type":"event","event":"bark_detected","data":{"dog_name":"Elsa","loudness_db":\#(70 + k)}}"#)
            }
            try robot.send(#"{"type":"event","event":"treat_dispensed","data":{"dog_name":"Rex","daily_count":1}}"#)
            try robot.send(#"{"type":"event","event":"mission_progress","data":{"dog_name":"Elsa","status":"success","stage":1}}"#)
            try robot.send(#"{"type":"event","event":"mission_progress","data":{"dog_name":"Elsa","status":"watching","stage":2}}"#)
            try robot.send(#"{"type":"event","event":"mission_progress","data":{"dog_name":"Elsa","status":"completed"}}"#)
        }
        // robot_online, 7 barks, a treat, a trick and the finished mission: 11 entries.
        let (notice, _) = try await log.waitFor { if case .timelineChanged = $0 { true } else { false } }
        var newest = try await phone.timelinePage(limit: 500)
        for _ in 0..<100 where newest.entries.count < 11 {
            try await Task.sleep(for: .milliseconds(50))
            newest = try await phone.timelinePage(limit: 500)
        }
        #expect(newest.entries.count == 11 && newest.entries.first?.event == "mission_progress" && newest.entries.last?.event == "robot_online")
        if case .timelineChanged(let id) = notice { #expect(newest.entries.map(\.id).contains(id)) }

        // Both ways in pages of 4: the same entries, once each.
        var back: [String] = [], forth: [String] = []
        for try await page in phone.timelinePages(limit: 4) { back += page.entries.map(\.id) }
        for try await page in phone.timelinePages(.oldestFirst(after: nil), limit: 4) { forth += page.entries.map(\.id) }
        #expect(back == newest.entries.map(\.id) && forth == back.reversed())
        await #expect(throws: RelayClientError.http(status: 400, code: "invalid_cursor", message: "not an entry ID of this device: nope")) {
            _ = try await phone.timelinePage(.newestFirst(before: "nope"))
        }

        // A copy in a file: the first sync takes everything, the next only what is new.
        let file = FileManager.default.temporaryDirectory.appendingPathComponent("timeline-\(UUID().uuidString).json")
        defer { try? FileManager.default.removeItem(at: file) }
        let copy = TimelineCopy(client: phone, store: FileTimelineStore(url: file))
        #expect(try await copy.sync().count == 11)
        try await onThread { try robot.send(#"{"type":"event","event":"dog_detected","data":{"dog_name":"Rex"}}"#) }
        var added: [TimelineEntry] = []
        for _ in 0..<100 where added.isEmpty {
            added = try await copy.sync()
            if added.isEmpty { try await Task.sleep(for: .milliseconds(50)) }
        }
        #expect(added.map(\.event) == ["dog_detected"])
        let reopened = TimelineCopy(client: phone, store: FileTimelineStore(url: file))
        let kept = await reopened.snapshot
        #expect(kept.entries.count == 12 && kept.begins != nil)

        let away = await reopened.summary(since: started.addingTimeInterval(-1))
        #expect(away.byDog["Elsa"] == AwaySummary.Counts(barks: 7, treats: 0, tricksDone: 1, tricksFailed: 0, missionsCompleted: 1))
        #expect(away.byDog["Rex"]?.treats == 1 && away.total.barks == 7 && away.offline == 0)
        await phone.stop()
    }

    @Test func theSummaryCountsTimeOfflineInItsWindow() {
        let t0 = Date(timeIntervalSince1970: 1_000_000)
        func entry(_ event: String, _ at: Double, since: Double? = nil) -> TimelineEntry {
            let data: JSON = since.map { ["since": .string(Date(timeInterval: $0, since: t0).formatted(.iso8601))] } ?? [:]
            return TimelineEntry(id: "\(at)", at: t0.addingTimeInterval(at), source: .relay, event: event,
                                 message: ["type": "event", "event": .string(event), "data": data])
        }
        let entries = [entry("robot_offline", 30, since: 0), entry("robot_online", 600), entry("robot_offline", 1_030, since: 1_000)]
        // From the start: gone 0–600 s, and from 1,000 s until now (1,200 s).
        #expect(AwaySummary(entries: entries, since: t0, now: t0.addingTimeInterval(1_200)).offline == 800)
        // A window opening while the robot was gone counts from the window's start.
        #expect(AwaySummary(entries: entries, since: t0.addingTimeInterval(100), now: t0.addingTimeInterval(700)).offline == 500)
    }
}
