import Foundation
import Testing
import WimzRobot

/// The Live Activity's types against the shapes of docs/protocol.md v1.4: ActivityKit decodes the
/// content state and the attributes with plain `JSONDecoder`, no key strategy.
@Suite struct MissionActivityTests {
    /// A content state as the contract writes it (members the robot did not send are null). The
    /// relay does not send Live Activity pushes yet: when it does, this gains one captured from
    /// the sender's test run.
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
}
