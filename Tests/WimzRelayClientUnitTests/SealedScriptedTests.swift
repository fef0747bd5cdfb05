import Foundation
import Testing
@testable import WimzRelayClient
@testable import WimzSealed

/// The app library's own refusals on a sealed device, whatever the relay forwards (a relay that
/// stopped refusing unsealed frames, or one that forges them): over a scripted socket.
@Suite struct SealedScriptedTests {
    @Test func unsealedAndForgedFramesAreDroppedAndOnlyTheRobotsOpen() async throws {
        let robot = SealedIdentity(), app = SealedIdentity()
        let roster = try Roster.make(deviceID: "dev1", epoch: 1, previousHash: nil, made: 0, robot: robot.publicKeys,
                                     members: [RosterMember(keys: app.publicKeys, role: .owner, control: true, until: nil, label: "")])
        let epoch = try Epoch(roster: roster, secret: Data(repeating: 7, count: 32))
        let transport = ScriptedTransport()
        var configuration = RelayClient.Configuration(url: URL(string: "http://127.0.0.1:9")!, deviceID: "dev1", token: "wimz_a_test")
        configuration.transport = transport
        configuration.recoverMissedEvents = false
        configuration.sealed = SealedHousehold(identity: app, verifiedRobot: robot.publicKeys)
        let client = RelayClient(configuration)
        let events = client.subscribe()
        await client.restoreSealedEpoch(epoch)
        await client.start()
        let socket = try await transport.waitForConnection(1)
        try await until { await client.state == .connected }

        var robotSealer = FrameSealer(identity: robot, deviceID: "dev1")
        var appSealer = FrameSealer(identity: app, deviceID: "dev1")
        let event = Data(#"{"type":"event","event":"mode_changed","data":{"mode":"idle"}}"#.utf8)
        socket.deliver(.text(#"{"type":"event","event":"mode_changed","data":{"mode":"forged"}}"#))  // unsealed
        socket.deliver(.text(try appSealer.seal(event, in: epoch)))                                 // not the robot
        socket.deliver(.text(try robotSealer.seal(event, in: epoch, ts: 1, kind: "mode_changed")))   // the robot's
        socket.deliver(.text(#"{"type":"event","event":"device_status","data":{"device_id":"dev1","online":true}}"#))  // the relay's

        var seen: [RelayEvent] = []
        for await received in events {
            if case .connection = received { continue }
            seen.append(received)
            if seen.count == 4 { break }
        }
        #expect(seen[0] == .sealedFrameRejected(.malformed))
        #expect(seen[1] == .sealedFrameRejected(.notTheRobot(kid: app.kid)))
        guard case .event(let opened) = seen[2] else { Issue.record("\(seen[2])"); return }
        #expect(opened.data == ["mode": "idle"] && opened.sealedAt == 1 && opened.isPastState)
        guard case .deviceStatus = seen[3] else { Issue.record("\(seen[3])"); return }

        // What the app sends goes sealed.
        try await client.send(text: #"{"type":"signal","sdp":"v=0"}"#)
        let sent = try #require(socket.sent.last)
        #expect(sent.hasPrefix(#"{"type":"sealed","v":1,"epoch":1,"kid":"\#(app.kid)""#) && !sent.contains("v=0"))
        await client.stop()
    }
}
