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

    /// The departures go with the roster that signs guests in, as many as fit the relay's body
    /// limit: a prefix of the chain, which is still a chain (the rest follow when the app connects).
    @Test func aProposalCarriesTheDeparturesThatFit() throws {
        let robot = SealedIdentity(), owner = SealedIdentity()
        func household(guests: Int) throws -> Roster {
            let guests = (1...guests).map { RosterMember(keys: SealedIdentity().publicKeys, role: .guest, control: false, until: 10_000 + Int64($0), label: "") }
            return try Roster.make(deviceID: "dev1", epoch: 3, previousHash: nil, made: 0, robot: robot.publicKeys,
                                   members: [RosterMember(keys: owner.publicKeys, role: .owner, control: true, until: nil, label: "")] + guests)
        }
        func departures(_ proposal: JSON) -> [Int] {
            guard case .array(let items)? = proposal["departures"] else { return [] }
            return items.compactMap { item in
                item["roster"]?.stringValue.flatMap(Base64URL.decode).flatMap { try? Roster.parse($0).epoch }
            }
        }
        let small = try household(guests: 2), large = try household(guests: 40)
        let whole = RelayClient.proposal(try small.signed(by: owner), departures: try small.departures(signedBy: owner, after: 0))
        #expect(departures(whole) == [4, 5])
        let cut = RelayClient.proposal(try large.signed(by: owner), departures: try large.departures(signedBy: owner, after: 0))
        #expect(cut.text.utf8.count <= RelayClient.proposalLimit)
        #expect(departures(cut).count > 1 && departures(cut) == Array(4..<(4 + departures(cut).count)))
        #expect(departures(RelayClient.proposal(try small.signed(by: owner), departures: [])).isEmpty)
    }
}
