import Foundation
import Testing
import RelayTestSupport
@testable import WimzRelayClient

/// The robot's settings through the Swift client, against a real relay (docs/protocol.md v1.6):
/// a write names the version it read, a stale one comes back as a conflict with the current
/// document, `updateSettings` merges and writes again, and the app hears what the robot applied.
@Suite struct SettingsClientTests {
    @Test func writesNameTheirVersionAConflictIsAValueAndTheRobotsReportIsHeard() async throws {
        let f = try await onThread { try RelayFixture() }
        let robot = try await onThread { try f.robot() }
        let phone = makeClient(f)
        let log = EventLog(phone)
        await phone.start()
        _ = try await log.waitFor(isOnline(true))
        let other = makeClient(f)  // a second phone of the household, not connected

        let empty = try await phone.settings()
        #expect(empty.desired == nil && empty.reported == nil && empty.version == 0 && !empty.isPending)
        guard case .written(let first) = try await phone.writeSettings(["volume": 0.5], replacing: 0) else {
            Issue.record("the first write was not stored")
            return
        }
        #expect(first.version == 1 && first.doc == ["volume": 0.5] && first.by == f.tokenIDs[f.appTokens["dev1"]!] && first.at != nil)
        // The other phone read before that write: its write is a conflict, with what is there now.
        #expect(try await other.writeSettings(["volume": 0.9], replacing: 0) == .conflict(current: first))
        // Read, merge, write: the first phone's value stays.
        let merged = try await other.updateSettings { current in
            guard case .object(var doc) = current else { return current }
            doc["treat_limit"] = 3
            return .object(doc)
        }
        #expect(merged.version == 2 && merged.doc == ["volume": 0.5, "treat_limit": 3])
        _ = try await log.waitFor { $0 == .settingsChanged(desiredVersion: 2, reportedVersion: nil) }

        // The robot got each version; what it says it runs is heard and read back.
        let limit = try await onThread {
            let handed = try robot.receive(until: { ($0["type"] as? String) == "settings" && ($0["version"] as? Int) == 2 })
            return (handed["doc"] as? [String: Any])?["treat_limit"] as? Int
        }
        #expect(limit == 3)
        try await onThread { try robot.send(#"{"type":"settings_applied","version":2,"doc":{"volume":0.5,"treat_limit":2}}"#) }
        _ = try await log.waitFor { $0 == .settingsChanged(desiredVersion: 2, reportedVersion: 2) }
        let settings = try await phone.settings()
        #expect(settings.reported?.version == 2 && settings.reported?.doc == ["volume": 0.5, "treat_limit": 2] && !settings.isPending)

        // Not a JSON object's worth of settings: the relay's refusal, typed.
        await #expect(throws: RelayClientError.http(status: 413, code: "too_large", message: "a settings document is at most 16384 bytes")) {
            _ = try await phone.writeSettings(["pad": .string(String(repeating: "x", count: 16 * 1024))], replacing: 2)
        }
        await phone.stop()
    }
}
