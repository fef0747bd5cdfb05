import Foundation
import Testing
@testable import WimzSealed

/// The Notification Service Extension's entry point on a push shaped as the relay sends it for a
/// sealed device (`PushMessage.body`: a neutral alert, the frame in `wimz.sealed`).
@Suite struct SealedNotificationTests {
    let robot = SealedIdentity(), app = SealedIdentity()

    func push(_ frame: String?) throws -> [AnyHashable: Any] {
        var wimz: [String: Any] = ["device_id": "dev1", "event": "bark_detected", "count": 1]
        if let frame { wimz["sealed"] = try JSONSerialization.jsonObject(with: Data(frame.utf8)) }
        return ["aps": ["alert": ["loc-key": "WIMZ_SEALED"], "mutable-content": 1, "thread-id": "dev1"], "wimz": wimz]
    }

    @Test func aPushedFrameOpensWithTheKeptEpochsAndNothingElse() throws {
        let roster = try Roster.make(deviceID: "dev1", epoch: 3, previousHash: nil, made: 0, robot: robot.publicKeys,
                                     members: [RosterMember(keys: app.publicKeys, role: .owner, control: true, until: nil, label: "")])
        let epoch = try Epoch(roster: roster, secret: Data(repeating: 9, count: 32))
        var sealer = FrameSealer(identity: robot, deviceID: "dev1")
        let now: Int64 = 1_795_000_000_000
        let frame = try sealer.seal(Data(#"{"type":"event","event":"bark_detected","data":{"dog_name":"Rex"}}"#.utf8), in: epoch,
                                    ts: now - 1_000, kind: "bark_detected")
        let opened = try #require(try SealedNotification.open(try push(frame), deviceID: "dev1", epochs: [epoch], now: now))
        #expect(String(decoding: opened.plaintext, as: UTF8.self).contains("Rex") && opened.kind == "bark_detected" && !opened.isPastState)
        #expect(try SealedNotification.open(try push(nil), deviceID: "dev1", epochs: [epoch]) == nil)  // too large: the kind only
        #expect(throws: FrameRejection.unknownEpoch(3)) { try SealedNotification.open(try push(frame), deviceID: "dev1", epochs: []) }
        #expect(throws: FrameRejection.tampered) {
            try SealedNotification.open(try push(frame), deviceID: "dev2", epochs: [epoch])  // sealed for another device
        }
    }
}
