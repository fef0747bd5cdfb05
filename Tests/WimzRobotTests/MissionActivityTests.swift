import Foundation
import Testing
import WimzRobot

/// The Live Activity's types against the shapes of docs/protocol.md v1.4: ActivityKit decodes the
/// content state and the attributes with plain `JSONDecoder`, no key strategy.
@Suite struct MissionActivityTests {
    /// The relay's own requests, captured from `test_a_whole_mission_reaches_the_lock_screen_with_the_app_closed`
    /// (Tests/Fixtures; that test fails when the relay's requests stop having their shape), decoded
    /// as ActivityKit does: the content state and a start's attributes with plain `JSONDecoder`.
    @Test func theRelaysCapturedRequestsDecodeIntoTheActivitysTypes() throws {
        let fixtures = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().appendingPathComponent("Fixtures")
        func aps(_ name: String) throws -> [String: Any] {
            let data = try Data(contentsOf: fixtures.appendingPathComponent("live-activity-\(name).json"))
            return try #require((try JSONSerialization.jsonObject(with: data) as? [String: Any])?["aps"] as? [String: Any])
        }
        func decode<T: Decodable>(_ type: T.Type, _ value: Any?) throws -> T {
            try JSONDecoder().decode(T.self, from: JSONSerialization.data(withJSONObject: try #require(value)))
        }
        let update = try decode(MissionActivityAttributes.ContentState.self, try aps("update")["content-state"])
        #expect(update == .init(status: "watching", trick: "sit", stage: 5, totalStages: 5, dogName: "Rex", rewards: 5, progress: 0.98,
                                targetSec: 3, robotOnline: true))
        let start = try aps("start")
        #expect(try decode(MissionActivityAttributes.self, start["attributes"]) == MissionActivityAttributes(deviceID: "robot-1", robotName: ""))
        #expect(start["attributes-type"] as? String == String(describing: MissionActivityAttributes.self))
        #expect(try decode(MissionActivityAttributes.ContentState.self, start["content-state"]).status == "waiting_for_dog")
        let end = try decode(MissionActivityAttributes.ContentState.self, try aps("end")["content-state"])
        #expect(end.status == "completed" && end.progress == nil && end.robotOnline)
    }

    /// A content state as the contract writes it (members the robot did not send are null).
    @Test func theContentStateDecodesTheContractsMembersWithPlainJSONDecoder() throws {
        let json = #"{"status":"watching","trick":"sit","stage":2,"total_stages":5,"dog_name":"Rex","rewards":1,"progress":0.4,"target_sec":3.0,"robot_online":true}"#
        let state = try JSONDecoder().decode(MissionActivityAttributes.ContentState.self, from: Data(json.utf8))
        #expect(state == .init(status: "watching", trick: "sit", stage: 2, totalStages: 5, dogName: "Rex", rewards: 1,
                               progress: 0.4, targetSec: 3, robotOnline: true))
        let away = #"{"status":null,"trick":null,"stage":null,"total_stages":null,"dog_name":null,"rewards":null,"progress":null,"target_sec":null,"robot_online":false}"#
        #expect(try JSONDecoder().decode(MissionActivityAttributes.ContentState.self, from: Data(away.utf8)) == .init(robotOnline: false))
        // What the app encodes for its own updates is what the relay sends: the same keys.
        let encoded = try JSONSerialization.jsonObject(with: JSONEncoder().encode(state)) as? [String: Any]
        #expect(Set(encoded?.keys.map { $0 } ?? []) == ["status", "trick", "stage", "total_stages", "dog_name", "rewards", "progress",
                                                         "target_sec", "robot_online"])
    }

    @Test func theAttributesAreThePushToStartRequestsAttributes() throws {
        let attributes = try JSONDecoder().decode(MissionActivityAttributes.self, from: Data(#"{"device_id":"robot-42","robot_name":"Kitchen WIM-Z"}"#.utf8))
        #expect(attributes == MissionActivityAttributes(deviceID: "robot-42", robotName: "Kitchen WIM-Z"))
        #expect(String(describing: MissionActivityAttributes.self) == "MissionActivityAttributes", "the attributes-type the relay names")
    }

    @Test func aMissionProgressBecomesTheStateTheAppShows() {
        let progress = MissionProgress(status: "success", trick: "down", stage: 3, totalStages: 5, dogName: "Elsa", rewards: 2)
        let state = MissionActivityAttributes.ContentState(progress, robotOnline: false)
        #expect(state.status == "success" && state.stage == 3 && state.totalStages == 5 && state.dogName == "Elsa" && !state.robotOnline)
    }

    /// One definition read both ways: the robot models' decoder converts snake_case keys, ActivityKit's
    /// does not; the members are found either way and written back as the guide spells them.
    @Test func aMissionProgressReadsTheSameWithOrWithoutKeyConversion() throws {
        let json = Data(#"{"status":"watching","trick":"sit","stage":2,"total_stages":5,"dog_name":"Rex","progress":1.5,"target_sec":3.0}"#.utf8)
        let expected = MissionProgress(status: "watching", trick: "sit", stage: 2, totalStages: 5, dogName: "Rex", progress: 1.5, targetSec: 3)
        #expect(try RobotJSON.decoder().decode(MissionProgress.self, from: json) == expected)
        #expect(try JSONDecoder().decode(MissionProgress.self, from: json) == expected)
        #expect(try JSONDecoder().decode(MissionActivityAttributes.ContentState.self, from: RobotJSON.encoder().encode(
            MissionActivityAttributes.ContentState(expected, robotOnline: false))) == .init(expected, robotOnline: false))
        let written = try JSONSerialization.jsonObject(with: RobotJSON.encoder().encode(expected)) as? [String: Any]
        #expect(Set(written?.keys.map { $0 } ?? []) == ["status", "trick", "stage", "total_stages", "dog_name", "progress", "target_sec"])
    }
}
