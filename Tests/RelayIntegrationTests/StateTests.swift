import Foundation
import Testing
import RelayTestSupport

/// The robot's last-known state (docs/protocol.md v1.2): its latest replayed events, verbatim, read
/// with a robot or app token — while it is online, once it has gone, and after a relay restart.
@Suite struct StateTests {
    func state(_ port: Int, _ token: String?, device: String = "dev1") throws -> (status: Int, json: [String: Any]) {
        let r = try HTTPTestClient.get(port: port, path: "/api/devices/\(device)/state",
                                       headers: token.map { ["Authorization": "Bearer \($0)"] } ?? [:])
        return (r.status, (try? r.json()) ?? [:])
    }

    func events(_ json: [String: Any]) -> [String: [String: Any]] {
        (json["events"] as? [String: Any] ?? [:]).compactMapValues { $0 as? [String: Any] }
    }

    @Test func theLatestReplayedEventsSurviveTheRobotLeavingAndARestart() throws {
        let f = try RelayFixture(devices: ["dev1", "dev2"])
        let app = f.appTokens["dev1"]!
        let never = try state(f.port, app)
        #expect(never.status == 200 && never.json["online"] as? Bool == false && never.json["last_seen"] is NSNull)
        #expect(events(never.json).isEmpty)

        let robot = try f.robot()
        _ = try robot.receiveJSON()
        let mode = #"{"type":"event","event":"mode_changed","data":{"mode":"training","previous_mode":"idle"},"timestamp":"2026-11-24T05:00:00Z"}"#
        try robot.send(#"{"type":"event","event":"mode_changed","data":{"mode":"idle"}}"#)
        try robot.send(mode)
        try robot.send(#"{"type":"event","event":"bark_detected","data":{"dog_name":"Rex"}}"#)  // not a replayed event
        try robot.send(#"{"type":"event","event":"mission_progress","data":{"status":"running","progress": 0.5}}"#)
        usleep(200_000)
        let online = try state(f.port, f.robotTokens["dev1"]!)
        #expect(online.json["online"] as? Bool == true && online.json["last_seen"] is String)
        #expect(Set(events(online.json).keys) == ["mode_changed", "mission_progress"])
        let raw = try HTTPTestClient.get(port: f.port, path: "/api/devices/dev1/state", headers: ["Authorization": "Bearer \(app)"]).text
        #expect(raw.contains(#""message":\#(mode)"#), "the message is embedded as the robot sent it: \(raw)")

        robot.close()
        _ = robot.waitForClose()
        usleep(1_500_000)  // the write-behind tick and the presence batch
        let gone = try state(f.port, app)
        #expect(gone.json["online"] as? Bool == false && gone.json["last_seen"] is String)
        #expect(events(gone.json)["mode_changed"]?["received_at"] is String)

        // A new relay on the same database: the state is the store's.
        #expect(f.relay.stop(signal: SIGTERM) == 0)
        let again = try RelayDaemon(databaseURL: f.database.url)
        defer { again.stop() }
        try again.waitUntilReady()
        #expect(again.waitForLog(containing: "credentials_loaded") != nil)
        let restarted = try state(again.port, app)
        #expect(restarted.json["online"] as? Bool == false && restarted.json["last_seen"] as? String == gone.json["last_seen"] as? String)
        #expect(events(restarted.json)["mode_changed"]?["message"] as? [String: Any] != nil)
        #expect((events(restarted.json)["mode_changed"]?["message"] as? [String: Any])?["timestamp"] as? String == "2026-11-24T05:00:00Z")
        #expect(events(restarted.json)["mission_progress"]?["received_at"] as? String
                == events(gone.json)["mission_progress"]?["received_at"] as? String)

        // Only the device's own tokens.
        #expect(try state(again.port, nil).status == 401)
        #expect(try state(again.port, f.appTokens["dev2"]!).status == 403)
        #expect(try state(again.port, app, device: "bad%20id").status == 400)
    }
}
