import Foundation
import Testing
import RelayStore
import RelayTestSupport
@testable import WimzRelayClient
@testable import WimzSealed

/// A sealed household's timeline and settings through the app library (docs/protocol.md v1.6
/// "Sealed", "History for a newcomer"): the robot's sealed entries open with the epochs a member
/// holds (fetched back from the relay when an app has only the current one), a newcomer reads from
/// the epoch it joined until an owner shares the earlier ones, and the settings go both ways
/// sealed, an old document under a newer version refused. The test plays the robot.
extension SealedClientTests {
    /// The robot's side of a roster frame, keeping the epoch's secret to seal its own frames with.
    func acceptRosterFrameKeepingEpoch(_ socket: WebSocketTestClient, _ f: RelayFixture, previous: Roster?) async throws -> Epoch {
        let signed = try SignedRoster(json: try await rosterFrame(socket))
        let roster = try signed.verifiedAsNext(after: previous, deviceID: "dev1", robot: robot.publicKeys, firstOwner: owner.publicKeys)
        let secret = Data((0..<32).map { _ in UInt8.random(in: 0 ... 255) })
        try await storeEpoch(signed, secret, f)
        return try Epoch(roster: roster, secret: secret)
    }

    /// The robot's socket (reads wait up to 15 s: longer than the usual 5, shorter than the relay's
    /// 20 s between pings, which a read answers and goes on, so a roster that never comes fails) and
    /// the owner's app holding epoch 1 (the owner alone), with the epoch's secret.
    func sealedOwner(_ f: RelayFixture) async throws -> (WebSocketTestClient, RelayClient, Epoch) {
        let socket = try await onThread {
            try WebSocketTestClient.connect(port: f.port, role: "robot", device: "dev1", token: f.robotTokens["dev1"], timeout: 15)
        }
        let ownerApp = makeClient(f) { $0.sealed = SealedHousehold(identity: self.owner, verifiedRobot: self.robot.publicKeys) }
        await ownerApp.start()
        _ = try await ownerApp.joinSealedHousehold()
        #expect(try await ownerApp.signNextRoster() == 1)
        let epoch = try await acceptRosterFrameKeepingEpoch(socket, f, previous: nil)
        #expect(try await ownerApp.refreshSealedEpoch() == 1)
        return (socket, ownerApp, epoch)
    }

    @Test func sealedHistoryOpensWithTheMembersEpochsAndThoseAnOwnerShares() async throws {
        let f = try await onThread { try RelayFixture() }
        let (socket, ownerApp, epoch1) = try await sealedOwner(f)
        var sealer = FrameSealer(identity: robot, deviceID: "dev1")
        func robotSends(_ inner: String, kind: String, in epoch: Epoch) async throws {
            let text = try sealer.seal(Data(inner.utf8), in: epoch, ts: Int64(Date().timeIntervalSince1970 * 1000), kind: kind)
            try await onThread { try socket.send(text) }
        }
        try await robotSends(#"{"type":"event","event":"bark_detected","data":{"dog_name":"Elsa"}}"#, kind: "bark_detected", in: epoch1)

        // A family member joins in epoch 2; its epochs live in a key store.
        let paired = try await RelayClient.pair(relay: URL(string: "http://127.0.0.1:\(f.port)")!,
                                                code: try await ownerApp.invite(access: .family, label: "family").code!, label: "family")
        let keyFile = FileManager.default.temporaryDirectory.appendingPathComponent("keys-\(UUID().uuidString)/sealed.json")
        defer { try? FileManager.default.removeItem(at: keyFile.deletingLastPathComponent()) }
        let household = try SealedHousehold(store: FileSealedKeyStore(url: keyFile))
        let familyKid = household.identity.kid
        let familyApp = makeClient(f, token: paired.token) { $0.sealed = household }
        _ = try await familyApp.joinSealedHousehold()
        #expect(try await ownerApp.signNextRoster(adding: try await ownerApp.pendingSealedMembers().map(\.rosterMember)) == 2)
        let epoch2 = try await acceptRosterFrameKeepingEpoch(socket, f, previous: epoch1.roster)
        #expect(try await familyApp.refreshSealedEpoch() == 2)
        try await robotSends(#"{"type":"event","event":"treat_dispensed","data":{"dog_name":"Rex"}}"#, kind: "treat_dispensed", in: epoch2)
        try await robotSends(#"{"type":"event","event":"mission_progress","data":{"dog_name":"Rex","status":"completed"}}"#,
                             kind: "mission_completed", in: epoch2)

        // An owner's app that holds only the current epoch fetches epoch 1 back and opens all three.
        let ownerAgain = makeClient(f) { $0.sealed = SealedHousehold(identity: self.owner, verifiedRobot: self.robot.publicKeys) }
        _ = try await ownerAgain.refreshSealedEpoch()
        var robotEntries: [TimelineEntry] = []
        for _ in 0..<200 where robotEntries.count < 3 {
            try await Task.sleep(for: .milliseconds(50))
            robotEntries = try await ownerAgain.timelinePage(limit: 500).entries.filter { $0.source == .robot }
        }
        #expect(robotEntries.map(\.event) == ["mission_progress", "treat_dispensed", "bark_detected"])
        #expect(robotEntries.map { if case .opened(let epoch, _)? = $0.sealing { epoch } else { 0 } } == [2, 2, 1])
        #expect(robotEntries.last?.data["dog_name"] == "Elsa" && robotEntries.allSatisfy { !$0.isPastState() })
        #expect(robotEntries.allSatisfy { $0.isPastState(at: Date().addingTimeInterval(121)) })

        // The newcomer: epoch 2's entries open; the bark from before it joined stays sealed, by its kind.
        let copy = TimelineCopy(client: familyApp)
        try await copy.sync()
        let bark = try #require(await copy.entries.first { $0.event == "bark_detected" })
        #expect(bark.sealing == .unopened(.unknownEpoch(1)) && bark.data == .null)
        let before = await copy.summary(since: Date().addingTimeInterval(-600))
        #expect(before.byDog[nil]?.barks == 1 && before.byDog["Rex"] == AwaySummary.Counts(treats: 1, missionsCompleted: 1))

        // The owner shares its epochs; the member's app takes them with its next epoch answer, keeps
        // them, and its copy opens the bark on the next sync.
        #expect(try await ownerApp.shareHistory(with: familyKid) == [1, 2])
        _ = try await familyApp.refreshSealedEpoch()
        try await copy.sync()
        let opened = try #require(await copy.entries.first { $0.event == "bark_detected" })
        #expect(opened.sealing.map { if case .opened(1, _) = $0 { true } else { false } } == true)
        #expect(opened.data["dog_name"] == "Elsa")
        #expect(await copy.summary(since: Date().addingTimeInterval(-600)).byDog["Elsa"]?.barks == 1)
        #expect(try FileSealedKeyStore(url: keyFile).epochs(of: "dev1").map(\.number) == [1, 2])
        // Only a family member of the current roster is shared with; the library says so before the relay.
        await #expect(throws: RelayClientError.self) { try await ownerApp.shareHistory(with: self.robot.kid) }
        for app in [ownerApp, familyApp] { await app.stop() }
    }

    @Test func aHistoryGrantOpensOnlyUnderAnOwnersSignatureForThisMember() throws {
        let family = SealedIdentity(), stranger = SealedIdentity()
        let roster = try Roster.make(deviceID: "dev1", epoch: 2, previousHash: nil, made: 0, robot: robot.publicKeys, members: [
            RosterMember(keys: owner.publicKeys, role: .owner, control: true, until: nil, label: ""),
            RosterMember(keys: family.publicKeys, role: .family, control: true, until: nil, label: ""),
        ])
        let earlier = try Epoch(roster: roster, secret: Data(repeating: 7, count: 32), number: 1)
        let member = try #require(roster.member(family.kid))
        let grant = try HistoryGrant.make(deviceID: "dev1", for: member, epochs: [earlier], by: owner)
        let opened = try grant.open(deviceID: "dev1", identity: family, rosters: [roster], current: roster)
        #expect(opened.map(\.number) == [1] && opened[0].secretBytes == Data(repeating: 7, count: 32) && opened[0].isGranted)
        // Signed by a family member, by an owner of no roster held, for another device or member.
        let byFamily = try HistoryGrant.make(deviceID: "dev1", for: member, epochs: [earlier], by: family)
        #expect(throws: SealedError.self) { try byFamily.open(deviceID: "dev1", identity: family, rosters: [roster], current: roster) }
        #expect(throws: SealedError.self) { try grant.open(deviceID: "dev1", identity: family, rosters: [], current: roster) }
        #expect(throws: SealedError.self) { try grant.open(deviceID: "dev2", identity: family, rosters: [roster], current: roster) }
        #expect(throws: SealedError.self) { try grant.open(deviceID: "dev1", identity: stranger, rosters: [roster], current: roster) }
        let forged = HistoryGrant(grant: grant.grant + Data(" ".utf8), by: grant.by, signature: grant.signature)
        #expect(throws: SealedError.self) { try forged.open(deviceID: "dev1", identity: family, rosters: [roster], current: roster) }
    }

    @Test func sealedSettingsGoBothWaysSealedAndAnOldOneUnderANewVersionIsRefused() async throws {
        let f = try await onThread { try RelayFixture() }
        let (socket, ownerApp, epoch) = try await sealedOwner(f)
        guard case .written(let first) = try await ownerApp.writeSettings(["night": "quiet"], replacing: 0) else {
            Issue.record("the first write conflicted")
            return
        }
        #expect(first.version == 1 && first.doc == ["night": "quiet"] && first.sealedRejection == nil)

        // The robot gets it sealed (the relay saw no "quiet"), opens it and reports what it runs.
        let sealedDoc = try await onThread {
            let frame = try socket.receive(until: { $0["type"] as? String == "settings" })
            return try JSONSerialization.data(withJSONObject: frame["doc"] ?? [:])
        }
        #expect(!String(decoding: sealedDoc, as: UTF8.self).contains("quiet"))
        var robotOpener = AppOpener(deviceID: "dev1")
        robotOpener.hold(epoch)
        let inner = try JSON(parsing: String(decoding: try robotOpener.openSettings(sealedDoc).plaintext, as: UTF8.self))
        #expect(inner == ["type": "settings", "version": 1, "doc": ["night": "quiet"]])
        var sealer = FrameSealer(identity: robot, deviceID: "dev1")
        let runs = try sealer.seal(Data(#"{"type":"settings_applied","version":1,"doc":{"night":"quiet","volume":3}}"#.utf8), in: epoch,
                                   ts: Int64(Date().timeIntervalSince1970 * 1000), kind: "settings")
        try await onThread { try socket.send(#"{"type":"settings_applied","version":1,"doc":\#(runs)}"#) }
        var settings = try await ownerApp.settings()
        for _ in 0..<200 where settings.reported == nil {
            try await Task.sleep(for: .milliseconds(50))
            settings = try await ownerApp.settings()
        }
        #expect(settings.desired?.doc == ["night": "quiet"] && settings.reported?.doc == ["night": "quiet", "volume": 3])
        #expect(!settings.isPending)

        // A second write; then the first document handed out as version 2 (a relay replaying it).
        _ = try await ownerApp.updateSettings { _ in ["night": "late"] }
        #expect(try await ownerApp.settings().desired?.doc == ["night": "late"])
        try f.database.connect().execute(
            "UPDATE device_settings SET desired_doc = \(String(decoding: sealedDoc, as: UTF8.self)) WHERE device_id = 'dev1'")
        let replayed = try await ownerApp.settings().desired
        #expect(replayed?.version == 2 && replayed?.doc == .null && replayed?.sealedRejection == .wrongVersion)
        await ownerApp.stop()
    }
}
