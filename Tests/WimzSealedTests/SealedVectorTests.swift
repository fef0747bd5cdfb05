import Foundation
import Testing
@testable import WimzSealed

/// The contract's bytes in the Swift library against vectors computed from the primitives alone
/// (Tests/Fixtures/sealed/vectors.py; the robot library checks the same file).
@Suite struct SealedVectorTests {
    static var vectors: [String: Any] {
        let url = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
            .appendingPathComponent("Fixtures/sealed/vectors.json")
        return (try? JSONSerialization.jsonObject(with: Data(contentsOf: url))) as? [String: Any] ?? [:]
    }
    static var deviceID: String { vectors["device_id"] as? String ?? "" }

    static func object(_ path: String...) -> [String: Any] {
        path.reduce(vectors) { $0[$1] as? [String: Any] ?? [:] }
    }

    static func identity(_ name: String) throws -> SealedIdentity {
        let keys = object("identities", name)
        return try SealedIdentity(signingKey: try hex(keys["sign_private"]), agreementKey: try hex(keys["hpke_private"]))
    }

    static func hex(_ value: Any?) throws -> Data {
        let text = try #require(value as? String)
        return Data(stride(from: 0, to: text.count, by: 2).map { offset in
            let start = text.index(text.startIndex, offsetBy: offset)
            return UInt8(text[start..<text.index(start, offsetBy: 2)], radix: 16)!
        })
    }

    static func signedRoster() throws -> SignedRoster { try SignedRoster(json: object("roster", "signed")) }

    /// The epoch the family member opens from its package and the robot's acceptance.
    static func familyEpoch() throws -> Epoch {
        let epoch = object("epoch")
        return try Epoch(roster: try signedRoster().roster, package: try #require(epoch["package"] as? [String: Any]),
                         robotSignature: try #require(epoch["robot_sig"] as? String), identity: try identity("family"))
    }

    static func frame(from sender: String) throws -> [String: Any] {
        let frames = try #require(vectors["frames"] as? [[String: Any]])
        return try #require(frames.first { $0["sender"] as? String == sender })
    }

    @Test func keysAndTheRosterAreTheVectors() throws {
        for name in ["robot", "owner", "family"] {
            let identity = try Self.identity(name)
            let keys = Self.object("identities", name)
            #expect(identity.kid == keys["kid"] as? String)
            #expect(Base64URL.encode(identity.publicKeys.sign) == keys["sign"] as? String)
            #expect(Base64URL.encode(identity.publicKeys.hpke) == keys["hpke"] as? String)
        }
        let code = try #require(Self.vectors["robot_verification_code"] as? String)
        #expect(try Self.identity("robot").publicKeys.verificationCode == code)
        #expect(try Self.identity("robot").publicKeys.matches(verificationCode: code.lowercased().replacingOccurrences(of: "-", with: " ")))
        #expect(try !Self.identity("owner").publicKeys.matches(verificationCode: code))
        let signed = try Self.signedRoster()
        #expect(signed.roster.hash == Self.object("roster")["hash"] as? String)
        #expect(signed.json == Self.object("roster", "signed") as? [String: String])
        let robot = try Self.identity("robot").publicKeys, owner = try Self.identity("owner")
        let roster = try signed.verifiedAsNext(after: nil, deviceID: Self.deviceID, robot: robot, firstOwner: owner.publicKeys)
        #expect(roster.members.map(\.role) == [.owner, .family])
        // Ed25519 in CryptoKit may randomise its signatures: this library's verifies, whatever its bytes.
        let resigned = try roster.signed(by: owner)
        #expect(try resigned.verifiedAsNext(after: nil, deviceID: Self.deviceID, robot: robot, firstOwner: owner.publicKeys) == roster)
    }

    @Test func theFamilysPackageOpensToTheVectorsSecret() throws {
        let epoch = try Self.familyEpoch()
        #expect(epoch.secretBytes == (try Self.hex(Self.object("epoch")["secret"])))
        let package = try #require(Self.object("epoch")["package"] as? [String: Any])
        let roster = try Self.signedRoster().roster
        // Not this end's package; the robot's acceptance of another roster; a flipped byte.
        #expect(throws: SealedError.packageRejected("not this end's package")) {
            try Epoch(roster: roster, package: package, robotSignature: Self.object("epoch")["robot_sig"] as! String, identity: try Self.identity("owner"))
        }
        #expect(throws: SealedError.notAcceptedByRobot) {
            try Epoch(roster: roster, package: package, robotSignature: Base64URL.encode(Data(count: 64)), identity: try Self.identity("family"))
        }
        var sealed = try #require(Base64URL.decode(package["sealed"] as! String))
        sealed[40] ^= 1
        #expect(throws: SealedError.packageRejected("the package does not open")) {
            try Epoch(roster: roster, package: ["kid": package["kid"]!, "sealed": Base64URL.encode(sealed)],
                      robotSignature: Self.object("epoch")["robot_sig"] as! String, identity: try Self.identity("family"))
        }
    }

    @Test func anAppsFrameSealsToTheVectorsBytes() throws {
        let vector = try Self.frame(from: "family")
        let expected = try #require(vector["frame"] as? [String: Any])
        var sealer = FrameSealer(identity: try Self.identity("family"), deviceID: Self.deviceID,
                                 sid: try #require(Base64URL.decode(expected["sid"] as! String)), after: (expected["n"] as! Int64) - 1)
        let text = try sealer.seal(Data((vector["plaintext"] as! String).utf8), in: try Self.familyEpoch(), ts: expected["ts"] as! Int64)
        let sealed = try #require(try JSONSerialization.jsonObject(with: Data(text.utf8)) as? [String: Any])
        for field in ["type", "kid", "sid", "ct"] { #expect(sealed[field] as? String == expected[field] as? String, "\(field)") }
        for field in ["v", "epoch", "n", "ts"] { #expect(sealed[field] as? Int64 == expected[field] as? Int64, "\(field)") }
        #expect(sealed["kind"] == nil)
        let aad = FrameCrypto.associatedData(deviceID: Self.deviceID, epoch: 1, kid: sealer.identity.kid, sid: sealer.sid, n: 1,
                                             ts: expected["ts"] as! Int64, kind: nil)
        #expect(Base64URL.encode(aad) == vector["aad"] as? String)
        let ct = try #require(Base64URL.decode(sealed["ct"] as! String)), sig = try #require(Base64URL.decode(sealed["sig"] as! String))
        #expect(sealer.identity.publicKeys.verifies(sig, of: aad + ct))
    }

    @Test func theRobotsFrameOpensOnceAsTheVectorSays() throws {
        let vector = try Self.frame(from: "robot")
        let text = try JSONSerialization.data(withJSONObject: try #require(vector["frame"]))
        var opener = AppOpener(deviceID: Self.deviceID)
        opener.hold(try Self.familyEpoch())
        let sealedAt = try #require((vector["frame"] as? [String: Any])?["ts"] as? Int64)
        guard case .opened(let frame) = try opener.open(text, now: sealedAt + 1_000) else { Issue.record("not opened"); return }
        #expect(String(decoding: frame.plaintext, as: UTF8.self) == vector["plaintext"] as? String)
        #expect(frame.kind == "bark_detected" && frame.ts == sealedAt && !frame.isPastState)
        #expect(try opener.open(text, now: sealedAt + 1_000) == .repeated)
    }

    @Test func departuresSignedAheadAreTheVectorsRosters() throws {
        let vector = Self.object("departures")
        let rosterText = try #require(vector["roster"] as? String)
        let roster = try Roster.parse(try #require(Base64URL.decode(rosterText)))
        let now = try #require((vector["now"] as? NSNumber)?.int64Value)
        let expected = try #require(vector["chain"] as? [[String: String]])
        let chain = try roster.departures(signedBy: try Self.identity("owner"), after: now)
        // The same rosters (this library's JSON may order keys its own way: the signed bytes are
        // what count, and nobody re-serialises them), each verifying as the robot checks it.
        let robot = try Self.identity("robot").publicKeys
        #expect(chain.count == expected.count)
        for (signed, vector) in zip(chain, expected) {
            let mine = try signed.verifiedAsNext(after: roster, deviceID: Self.deviceID, robot: robot)
            let theirs = try SignedRoster(json: vector).verifiedAsNext(after: roster, deviceID: Self.deviceID, robot: robot)
            #expect(mine.epoch == theirs.epoch && mine.previousHash == theirs.previousHash && mine.made == theirs.made)
            #expect(mine.members == theirs.members && mine.lockScreen == theirs.lockScreen && mine.robot == theirs.robot)
        }
    }
}
