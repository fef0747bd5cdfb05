import Crypto
import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
import Testing
import RelayTestSupport
@testable import WimzRelayClient
@testable import WimzSealed
import WimzRobot

/// The app library in a sealed household through the real relay (docs/protocol.md "The sealed
/// household (v1.5)"): it hands over its keys, opens its package of the epoch, and from then on
/// seals its commands and opens the robot's frames; whatever the relay forges or leaves unsealed
/// is dropped and reported. The test plays the robot (a raw socket, this library's crypto).
@Suite struct SealedClientTests {
    let robot = SealedIdentity(), owner = SealedIdentity()

    /// `PUT …/sealed/epochs/1` as the robot: the owner's roster (the app alone), the robot's
    /// acceptance, the app's package. Returns the epoch as the robot holds it.
    func sealFirstEpoch(_ f: RelayFixture) async throws -> Epoch {
        let roster = try Roster.make(deviceID: "dev1", epoch: 1, previousHash: nil, made: 0, robot: robot.publicKeys,
                                     members: [RosterMember(keys: owner.publicKeys, role: .owner, control: true, until: nil, label: "")])
        let secret = Data((0..<32).map { _ in UInt8.random(in: 0 ... 255) })
        try await storeEpoch(roster.signed(by: owner), secret, f)
        return try Epoch(roster: roster, secret: secret)
    }

    /// `PUT …/sealed/epochs/E` with the robot's token: the signed roster, the robot's acceptance,
    /// `secret` sealed to every member.
    /// `acceptedAs`: the roster the robot's acceptance names (a relay that changed the roster it
    /// hands out keeps the real one's signatures).
    func storeEpoch(_ signed: SignedRoster, _ secret: Data, _ f: RelayFixture, acceptedAs accepted: Roster? = nil) async throws {
        let roster = signed.roster
        let body: [String: Any] = ["roster": signed.json, "robot_sig": try Epoch.acceptance(of: accepted ?? roster, by: robot),
                                   "packages": try roster.members.map { try Epoch.package(secret, for: $0, in: roster) }]
        var request = URLRequest(url: URL(string: "http://127.0.0.1:\(f.port)/api/devices/dev1/sealed/epochs/\(roster.epoch)")!)
        request.httpMethod = "PUT"
        request.httpBody = try JSONSerialization.data(withJSONObject: body)
        request.setValue("Bearer \(f.robotTokens["dev1"]!)", forHTTPHeaderField: "Authorization")
        let (_, response) = try await URLSession.shared.data(for: request)
        #expect((response as? HTTPURLResponse)?.statusCode == 201)
    }

    /// The robot's side of a roster that reached it as a frame: verified (the first against the
    /// owner it pinned), a fresh secret sealed to every member, the epoch stored.
    func acceptRosterFrame(_ frame: [String: Any], _ f: RelayFixture, previous: Roster?) async throws -> Roster {
        let signed = try SignedRoster(json: frame)
        let roster = try signed.verifiedAsNext(after: previous, deviceID: "dev1", robot: robot.publicKeys, firstOwner: owner.publicKeys)
        try await storeEpoch(signed, Data((0..<32).map { _ in UInt8.random(in: 0 ... 255) }), f)
        return roster
    }

    /// The next roster frame the robot's socket receives.
    func rosterFrame(_ socket: WebSocketTestClient) async throws -> [String: Any] {
        let data = try await onThread { try JSONSerialization.data(withJSONObject: try socket.receive(until: { $0["type"] as? String == "roster" })) }
        return try #require(try JSONSerialization.jsonObject(with: data) as? [String: Any])
    }

    /// The robot's socket and the owner's app, started, with its first roster signed and epoch 1
    /// stored as the robot would (SealedHistoryClientTests.swift).
    func ownerWithItsRobot(_ f: RelayFixture) async throws -> (WebSocketTestClient, RelayClient, Roster) {
        let (socket, ownerApp, epoch) = try await sealedOwner(f)
        return (socket, ownerApp, epoch.roster)
    }

    @Test func anOwnersAppSignsMembersInThroughTheRelay() async throws {
        let f = try await onThread { try RelayFixture() }
        let family = SealedIdentity()
        let familyToken = try await onThread { try f.issue(device: "dev1", role: .app).secret }
        let robotSocket = try await onThread { try f.robot() }
        let ownerApp = makeClient(f) { $0.sealed = SealedHousehold(identity: self.owner, verifiedRobot: self.robot.publicKeys) }
        let familyApp = makeClient(f, token: familyToken) { $0.sealed = SealedHousehold(identity: family) }
        for app in [ownerApp, familyApp] {
            await app.start()
            _ = try await app.joinSealedHousehold()
        }
        // The first roster: the owner alone; the robot checks it against the owner it pinned.
        #expect(try await ownerApp.signNextRoster() == 1)
        let first = try await acceptRosterFrame(try await rosterFrame(robotSocket), f, previous: nil)
        #expect(try await ownerApp.refreshSealedEpoch() == 1)
        await #expect(throws: RelayClientError.self) { try await familyApp.refreshSealedEpoch() }  // not_in_roster
        // The family member, pending, signed in.
        let pending = try await ownerApp.pendingSealedMembers()
        #expect(pending.map(\.keys) == [family.publicKeys] && pending[0].access == .owner)  // issued with the default access
        #expect(try await ownerApp.signNextRoster(adding: pending.map(\.rosterMember)) == 2)
        let second = try await acceptRosterFrame(try await rosterFrame(robotSocket), f, previous: first)
        #expect(second.members.map(\.kid) == [owner.kid, family.kid])
        // Both apps hear of epoch 2 from the relay and fetch their packages themselves.
        let deadline = Date().addingTimeInterval(20)
        while Date() < deadline {
            if await ownerApp.sealedEpoch == 2, await familyApp.sealedEpoch == 2 { break }
            try await Task.sleep(for: .milliseconds(20))
        }
        #expect(await ownerApp.sealedEpoch == 2)
        #expect(await familyApp.sealedEpoch == 2)
        #expect(await familyApp.robotKeyTrust == .unverified)  // it learned the robot's key through the relay only
        #expect(await !familyApp.verifyRobotKey(code: SealedIdentity().publicKeys.verificationCode))
        #expect(await familyApp.verifyRobotKey(code: robot.publicKeys.verificationCode))  // the code the robot shows
        #expect(await familyApp.robotKeyTrust == .verified)
        for app in [ownerApp, familyApp] { await app.stop() }
    }

    @Test func anOwnersAppSignsOutWhoWasRemovedAndAGuestWhoseTimeIsUp() async throws {
        let f = try await onThread { try RelayFixture() }
        let (robotSocket, ownerApp, first) = try await ownerWithItsRobot(f)
        var roster = first
        // Family, and a guest whose access ends in a few seconds, invited and signed in.
        let guestEnd = Date().addingTimeInterval(8)  // after the steps below, even on a busy machine
        let relay = URL(string: "http://127.0.0.1:\(f.port)")!
        let family = try await RelayClient.pair(relay: relay, code: try await ownerApp.invite(access: .family, label: "family").code!, label: "family")
        let guest = try await RelayClient.pair(relay: relay, code: try await ownerApp.invite(access: .guest, label: "sitter", until: guestEnd).code!,
                                               label: "sitter")
        let familyKeys = SealedIdentity(), guestKeys = SealedIdentity()
        for (paired, identity) in [(family, familyKeys), (guest, guestKeys)] {
            _ = try await makeClient(f, token: paired.token) { $0.sealed = SealedHousehold(identity: identity) }.joinSealedHousehold()
        }
        try await ownerApp.refreshSealedEpoch()
        #expect(try await ownerApp.signNextRoster(adding: try await ownerApp.pendingSealedMembers().map(\.rosterMember)) == 2)
        let signingIn = try await rosterFrame(robotSocket)
        roster = try await acceptRosterFrame(signingIn, f, previous: roster)
        #expect(Set(roster.members.map(\.kid)) == [owner.kid, familyKeys.kid, guestKeys.kid])
        // The guest's end as the relay keeps it (to the second), which the roster carries.
        let guestUntil = try #require(roster.members.first { $0.kid == guestKeys.kid }?.until)
        #expect(abs(guestUntil - Int64(guestEnd.timeIntervalSince1970 * 1000)) < 1000)
        // With it, signed ahead, the guest's departure: a robot keeps it and needs no app at the end.
        let departures = try #require(signingIn["departures"] as? [[String: Any]])
        let departure = try SignedRoster(json: try #require(departures.first))
            .verifiedAsNext(after: roster, deviceID: "dev1", robot: robot.publicKeys, firstOwner: owner.publicKeys)
        #expect(departures.count == 1 && departure.made == guestUntil && Set(departure.members.map(\.kid)) == [owner.kid, familyKeys.kid])

        // Removed through the relay: the owner's app signs the family member out; when the guest's
        // time is up, the guest. (Which roster the guest leaves in depends on how fast this ran.)
        try await ownerApp.removeMember(family.tokenID)
        var rosters: [Roster] = []
        while roster.members.count > 1 {
            roster = try await acceptRosterFrame(try await rosterFrame(robotSocket), f, previous: roster)
            rosters.append(roster)
        }
        #expect(!rosters[0].members.contains { $0.kid == familyKeys.kid })
        #expect(rosters.last!.members.map(\.kid) == [owner.kid])
        let guestLeft = try #require(rosters.first { !$0.members.contains { $0.kid == guestKeys.kid } })
        #expect(guestLeft.made >= guestUntil)
        await ownerApp.stop()
    }

    @Test func anOwnersOwnChangeIsSignedAsAskedAndTheRelaysWordOnlyTakesRightsAway() async throws {
        let f = try await onThread { try RelayFixture() }
        let (robotSocket, ownerApp, first) = try await ownerWithItsRobot(f)
        var roster = first
        // A guest without control, its access ending in a day, invited and signed in.
        let end = Date().addingTimeInterval(86_400)
        let guest = try await RelayClient.pair(relay: URL(string: "http://127.0.0.1:\(f.port)")!,
                                               code: try await ownerApp.invite(access: .guest, label: "sitter", until: end).code!, label: "sitter")
        let guestKeys = SealedIdentity()
        _ = try await makeClient(f, token: guest.token) { $0.sealed = SealedHousehold(identity: guestKeys) }.joinSealedHousehold()
        try await ownerApp.refreshSealedEpoch()
        #expect(try await ownerApp.signNextRoster(adding: try await ownerApp.pendingSealedMembers().map(\.rosterMember)) == 2)
        roster = try await acceptRosterFrame(try await rosterFrame(robotSocket), f, previous: roster)
        let endInRoster = try #require(roster.member(guestKeys.kid)?.until)

        // This app's user grants the guest control: the next roster has it, as asked.
        _ = try await ownerApp.updateMember(guest.tokenID, control: true)
        roster = try await acceptRosterFrame(try await rosterFrame(robotSocket), f, previous: roster)
        #expect(roster.member(guestKeys.kid) == RosterMember(keys: guestKeys.publicKeys, role: .guest, control: true, until: endInRoster, label: "sitter"))

        // Changed elsewhere (another owner's app without the seal, straight at the relay): a later
        // end, which grants, and control withdrawn, which takes away. Only the second is followed.
        #expect(try await ownerApp.refreshSealedEpoch() == 3)
        let elsewhere = makeClient(f, token: try await onThread { try f.issue(device: "dev1", role: .app).secret })
        _ = try await elsewhere.updateMember(guest.tokenID, until: .at(end.addingTimeInterval(86_400)))
        _ = try await elsewhere.updateMember(guest.tokenID, control: false)
        _ = try await ownerApp.signHouseholdChanges()  // or its watch on the last epoch: one roster either way
        roster = try await acceptRosterFrame(try await rosterFrame(robotSocket), f, previous: roster)
        #expect(roster.epoch == 4)
        #expect(roster.member(guestKeys.kid) == RosterMember(keys: guestKeys.publicKeys, role: .guest, control: false, until: endInRoster, label: "sitter"))

        // The later end waits for this app's owner, who sees it and confirms it as shown.
        #expect(try await ownerApp.refreshSealedEpoch() == 4)
        let grants = try await ownerApp.pendingSealedGrants()
        let laterEnd = Int64(end.addingTimeInterval(86_400).timeIntervalSince1970.rounded(.down)) * 1000
        #expect(grants.map(\.tokenID) == [guest.tokenID] && grants.first?.member == roster.member(guestKeys.kid))
        #expect(grants.first?.granted == RosterMember(keys: guestKeys.publicKeys, role: .guest, control: false, until: laterEnd, label: "sitter"))
        #expect(try await ownerApp.confirmGrants(grants) == 5)
        roster = try await acceptRosterFrame(try await rosterFrame(robotSocket), f, previous: roster)
        #expect(roster.member(guestKeys.kid) == grants.first?.granted)
        #expect(try await ownerApp.refreshSealedEpoch() == 5)
        #expect(try await ownerApp.pendingSealedGrants().isEmpty)
        await ownerApp.stop()
    }

    /// The robot's opening of the app's frame (the app's signature, then the AEAD).
    func openFromApp(_ frame: [String: Any], _ epoch: Epoch) throws -> [String: Any] {
        let sid = frame["sid"] as! String, n = (frame["n"] as! NSNumber).int64Value, ts = (frame["ts"] as! NSNumber).int64Value
        let aad = FrameCrypto.associatedData(deviceID: "dev1", epoch: 1, kid: owner.kid, sid: sid, n: n, ts: ts, kind: nil)
        let ct = try #require(Base64URL.decode(frame["ct"] as! String))
        #expect(owner.publicKeys.verifies(try #require(Base64URL.decode(frame["sig"] as! String)), of: aad + ct))
        let box = try ChaChaPoly.SealedBox(nonce: try FrameCrypto.nonce(n), ciphertext: ct.dropLast(16), tag: ct.suffix(16))
        let plain = try ChaChaPoly.open(box, using: FrameCrypto.key(epoch, sid: try #require(Base64URL.decode(sid)), deviceID: "dev1",
                                                                     kid: owner.kid), authenticating: aad)
        return try #require(try JSONSerialization.jsonObject(with: plain) as? [String: Any])
    }

    /// The owner's app, started and online, with the robot's key verified, in epoch 1 (the owner
    /// alone), which the relay told it of.
    func connectedOwner(_ f: RelayFixture) async throws -> (RelayClient, EventLog, Epoch) {
        let client = makeClient(f) { $0.sealed = SealedHousehold(identity: self.owner, verifiedRobot: self.robot.publicKeys) }
        let log = EventLog(client)
        await client.start()
        _ = try await log.waitFor(isOnline(true))
        #expect(try await client.joinSealedHousehold() == owner.kid)
        let epoch = try await sealFirstEpoch(f)
        // The relay tells the connected app of the new epoch; the client fetches its package itself.
        let deadline = Date().addingTimeInterval(10)
        while await client.sealedEpoch == nil, Date() < deadline { try await Task.sleep(for: .milliseconds(20)) }
        #expect(await client.robotKeyTrust == .verified)
        #expect(await client.sealedEpoch == 1)
        return (client, log, epoch)
    }

    @Test func commandsAndEventsGoSealedAndForgeriesAreReported() async throws {
        let f = try await onThread { try RelayFixture() }
        let robotSocket = try await onThread { try f.robot() }
        let (client, log, epoch) = try await connectedOwner(f)

        // A command: sealed on the way out, its sealed answer opened and matched by its random id.
        async let answered: Void = onThread {
            let frame = try robotSocket.receive(until: { $0["type"] as? String == "sealed" })
            let command = try self.openFromApp(frame, epoch)
            #expect(command["command"] as? String == "treat")
            var sealer = FrameSealer(identity: self.robot, deviceID: "dev1")
            let response = #"{"type":"response","id":"\#(command["id"] as! String)","ok":true,"data":{"given":1}}"#
            try robotSocket.send(try sealer.seal(Data(response.utf8), in: epoch))
        }
        let response = try await client.send(command: "treat", data: ["count": 1])
        try await answered
        #expect(response.ok && response.data == ["given": 1] && response.id.hasPrefix("app-1-"))

        // An event, sealed by the robot with the kind the relay may see.
        var sealer = FrameSealer(identity: robot, deviceID: "dev1")
        let now = Int64(Date().timeIntervalSince1970 * 1000)
        let bark = try sealer.seal(Data(#"{"type":"event","event":"bark_detected","data":{"confidence":0.9}}"#.utf8), in: epoch,
                                   ts: now, kind: "bark_detected")
        try robotSocket.send(bark)
        let (event, at) = try await log.waitFor { if case .event(let m) = $0 { m.name == "bark_detected" } else { false } }
        guard case .event(let message) = event else { return }
        #expect(message.sealedAt == now && !message.isPastState && message.data["confidence"] == 0.9)

        // What a relay could do to the robot's frames: each is dropped (the unsealed one by the relay
        // itself) and the tampered one reported; none arrives.
        var tampered = try #require(try JSONSerialization.jsonObject(with: Data(bark.utf8)) as? [String: Any])
        tampered["n"] = 9
        try robotSocket.send(String(decoding: try JSONSerialization.data(withJSONObject: tampered), as: UTF8.self))
        try robotSocket.send(#"{"type":"event","event":"bark_detected","data":{"confidence":1.0}}"#)  // the relay drops it
        try robotSocket.send(bark)  // a repeat: dropped silently
        _ = try await log.waitFor(after: at) { $0 == .sealedFrameRejected(.tampered) }
        // A last frame to know the ones before it came through (the socket keeps their order).
        try robotSocket.send(try sealer.seal(Data(#"{"type":"event","event":"mode_changed","data":{}}"#.utf8), in: epoch, ts: now,
                                             kind: "mode_changed"))
        _ = try await log.waitFor(after: at) { if case .event(let m) = $0 { m.name == "mode_changed" } else { false } }
        let barks = await log.events.filter { if case .event(let m) = $0 { m.name == "bark_detected" } else { false } }
        #expect(barks.count == 1)
        await client.stop()
    }

    @Test func theRobotsAPIGoesSealedOverTheSocket() async throws {
        let f = try await onThread { try RelayFixture() }
        let robotSocket = try await onThread { try f.robot() }
        let (client, _, epoch) = try await connectedOwner(f)

        // The robot's side: the request opened, its body in parts (over one frame); first another
        // app's answer (dropped), then this one's in two parts, each sealed.
        let body = Data((0..<40_000).map { UInt8($0 % 251) }), upload = Data((0..<100_000).map { UInt8($0 % 241) })
        async let answered: ([String: String], Data) = onThread {
            let request = try self.openFromApp(try robotSocket.receive(until: { $0["type"] as? String == "sealed" }), epoch)
            let id = request["id"] as! String
            var uploaded = try #require(Data(base64Encoded: request["body"] as! String)), more = request["more"] as? Bool
            while more == true {
                let part = try self.openFromApp(try robotSocket.receive(until: { $0["type"] as? String == "sealed" }), epoch)
                #expect(part["type"] as? String == "http_body" && part["id"] as? String == id)
                uploaded += try #require(Data(base64Encoded: part["body"] as! String))
                more = part["more"] as? Bool
            }
            var sealer = FrameSealer(identity: self.robot, deviceID: "dev1")
            let parts: [[String: Any]] = [
                ["type": "http_response", "id": "app-9-other", "status": 500, "headers": [:], "body": NSNull(), "more": false],
                ["type": "http_response", "id": id, "status": 200, "headers": ["content-type": "application/json"],
                 "body": body.prefix(30_000).base64EncodedString(), "more": true],
                ["type": "http_body", "id": id, "body": body.dropFirst(30_000).base64EncodedString(), "more": false]]
            for part in parts { try robotSocket.send(try sealer.seal(try JSONSerialization.data(withJSONObject: part), in: epoch)) }
            return (request.compactMapValues { $0 as? String }, uploaded)
        }
        let api = RobotAPI(route: .sealed(client))
        #expect(await api.route().kind == .sealed)
        let answer = try await client.robotRequest("POST", path: "/standin/echo", query: "x=1", headers: ["content-type": "application/octet-stream"],
                                                   body: upload)
        let (request, uploaded) = try await answered
        #expect(request["method"] == "POST" && request["path"] == "/standin/echo" && request["query"] == "x=1")
        #expect(uploaded == upload)
        #expect(answer.status == 200 && answer.body == body && answer.headers["content-type"] == "application/json")
        #expect(await client.pendingCommands == 0)

        // Typed, through RobotAPI: the guide's GET /mode, answered sealed.
        async let modeAnswered: Void = onThread {
            let request = try self.openFromApp(try robotSocket.receive(until: { $0["type"] as? String == "sealed" }), epoch)
            #expect(request["method"] as? String == "GET" && request["path"] as? String == "/mode")
            var sealer = FrameSealer(identity: self.robot, deviceID: "dev1")
            let mode = #"{"mode":"coach","locked":false}"#
            let part: [String: Any] = ["type": "http_response", "id": request["id"]!, "status": 200, "headers": [:],
                                       "body": Data(mode.utf8).base64EncodedString(), "more": false]
            try robotSocket.send(try sealer.seal(try JSONSerialization.data(withJSONObject: part), in: epoch))
        }
        #expect(try await api.mode().mode == "coach")
        try await modeAnswered
        // A body over the robot's limit is refused before anything is sent.
        await #expect(throws: RelayClientError.http(status: 413, code: "too_large",
                                                    message: "a sealed request body is at most 1048576 bytes")) {
            try await client.robotRequest("PUT", path: "/x", body: Data(count: RelayClient.sealedRequestBodyLimit + 1))
        }
        await client.stop()
    }

    @Test func aRosterTheRelayChangedIsRefused() async throws {
        let f = try await onThread { try RelayFixture() }
        let client = makeClient(f) { $0.sealed = SealedHousehold(identity: self.owner, verifiedRobot: self.robot.publicKeys) }
        _ = try await client.joinSealedHousehold()
        var previous = try await sealFirstEpoch(f).roster
        #expect(try await client.refreshSealedEpoch() == 1)
        // The owner signed, and the robot accepted, the owner and a family member; the relay hands
        // out the roster without the family member (with the real one's signatures, and packages of
        // a secret of its own: HPKE needs only the members' public keys). Next in line, the owner's
        // signature fails; an epoch further on, where the app has no roster to chain from, the
        // robot's acceptance does.
        for epoch in [2, 3] {
            let owner = RosterMember(keys: self.owner.publicKeys, role: .owner, control: true, until: nil, label: "")
            let family = RosterMember(keys: SealedIdentity().publicKeys, role: .family, control: true, until: nil, label: "")
            let real = try Roster.make(deviceID: "dev1", epoch: epoch, previousHash: previous.hash, made: 1, robot: robot.publicKeys,
                                       members: [owner, family])
            let dropped = try Roster.make(deviceID: "dev1", epoch: epoch, previousHash: previous.hash, made: 1, robot: robot.publicKeys,
                                          members: [owner])
            let forged = SignedRoster(roster: dropped, by: self.owner.kid, signature: try real.signed(by: self.owner).signature)
            try await storeEpoch(forged, Data(repeating: 9, count: 32), f, acceptedAs: real)
            let refusal: SealedError = epoch == 2 ? .rosterRejected("the owner's signature does not verify") : .notAcceptedByRobot
            await #expect(throws: refusal) { try await client.refreshSealedEpoch() }
            #expect(await client.sealedEpoch == 1)
            previous = real
        }
    }

    @Test func anEpochNamingAnotherRobotIsRefused() async throws {
        let f = try await onThread { try RelayFixture() }
        let impostor = SealedIdentity()
        let client = makeClient(f) { $0.sealed = SealedHousehold(identity: self.owner, verifiedRobot: impostor.publicKeys) }
        _ = try await client.joinSealedHousehold()
        _ = try await sealFirstEpoch(f)
        await #expect(throws: SealedError.rosterRejected("the roster names another robot key")) { try await client.refreshSealedEpoch() }
        #expect(await client.sealedEpoch == nil)
        // Without a verified key the robot's is taken, and shown as unverified.
        let trusting = makeClient(f) { $0.sealed = SealedHousehold(identity: self.owner) }
        #expect(try await trusting.refreshSealedEpoch() == 1)
        #expect(await trusting.robotKeyTrust == .unverified)
    }
}
