import Foundation
import Testing
@testable import WimzSealed

/// What an app does with the robot's sealed frames: each check refuses what a relay could forge,
/// and late frames open as past state.
@Suite struct AppOpenerTests {
    let deviceID = "robot-sealed-1"
    let now: Int64 = 1_795_000_000_000
    let robot = SealedIdentity(), owner = SealedIdentity(), family = SealedIdentity()

    func roster(epoch: Int = 1, previous: Roster? = nil, members: [SealedIdentity]? = nil) throws -> Roster {
        let people = members ?? [owner, family]
        return try Roster.make(deviceID: deviceID, epoch: epoch, previousHash: previous?.hash, made: now, robot: robot.publicKeys,
                               members: people.enumerated().map { index, person in
                                   RosterMember(keys: person.publicKeys, role: index == 0 ? .owner : .family, control: true, until: nil, label: "")
                               })
    }

    func epoch(_ roster: Roster) throws -> Epoch { try Epoch(roster: roster, secret: Data((0..<32).map { UInt8($0 + roster.epoch) })) }

    func robotFrame(_ epoch: Epoch, sealer: inout FrameSealer, ts: Int64? = nil, kind: String? = "bark_detected") throws -> Data {
        Data(try sealer.seal(Data(#"{"type":"event","event":"bark_detected","data":{}}"#.utf8), in: epoch, ts: ts ?? now, kind: kind).utf8)
    }

    func edited(_ frame: Data, _ change: (inout [String: Any]) -> Void) throws -> Data {
        var object = try #require(try JSONSerialization.jsonObject(with: frame) as? [String: Any])
        change(&object)
        return try JSONSerialization.data(withJSONObject: object)
    }

    @Test func everyForgeryIsRejectedAndNamed() throws {
        let first = try epoch(try roster())
        var opener = AppOpener(deviceID: deviceID)
        opener.hold(first)
        var sealer = FrameSealer(identity: robot, deviceID: deviceID)
        let frame = try robotFrame(first, sealer: &sealer)
        #expect(throws: FrameRejection.tampered) {
            try opener.open(try self.edited(frame) { $0["ct"] = Base64URL.encode(Data(repeating: 7, count: 40)) }, now: self.now)
        }
        #expect(throws: FrameRejection.tampered) {
            try opener.open(try self.edited(frame) { $0["kind"] = "dog_detected" }, now: self.now)
        }
        #expect(throws: FrameRejection.tampered) {
            try opener.open(try self.edited(frame) { $0["n"] = 2 }, now: self.now)
        }
        #expect(throws: FrameRejection.unknownEpoch(2)) {
            try opener.open(try self.edited(frame) { $0["epoch"] = 2 }, now: self.now)
        }
        var member = FrameSealer(identity: family, deviceID: deviceID)
        #expect(throws: FrameRejection.notTheRobot(kid: family.kid)) {
            try opener.open(try self.robotFrame(first, sealer: &member), now: self.now)
        }
        for text in [#"{"type":"event"}"#, #"{"type":"sealed","v":1,"epoch":true}"#, "not json"] {
            #expect(throws: FrameRejection.malformed) { try opener.open(Data(text.utf8), now: self.now) }
        }
        // None of those spent the frame: the real one still opens, once.
        guard case .opened = try opener.open(frame, now: now) else { Issue.record("not opened"); return }
        #expect(try opener.open(frame, now: now) == .repeated)
    }

    @Test func lateFramesOpenAsPastState() throws {
        let first = try epoch(try roster())
        var opener = AppOpener(deviceID: deviceID)
        opener.hold(first)
        var sealer = FrameSealer(identity: robot, deviceID: deviceID)
        func opened(_ frame: Data) throws -> OpenedFrame {
            guard case .opened(let opened) = try opener.open(frame, now: now) else { throw FrameRejection.malformed }
            return opened
        }
        #expect(try opened(try robotFrame(first, sealer: &sealer, ts: now - 121_000)).isPastState)
        #expect(try !opened(try robotFrame(first, sealer: &sealer, ts: now - 5_000)).isPastState)
        // Older than a bark already shown: past state, though within 120 s.
        #expect(try opened(try robotFrame(first, sealer: &sealer, ts: now - 10_000)).isPastState)
        #expect(try !opened(try robotFrame(first, sealer: &sealer, ts: now - 10_000, kind: "mode_changed")).isPastState)
    }

    @Test func aMemberLeftOutOfTheNextEpochCannotOpenIt() throws {
        let first = try roster()
        let second = try roster(epoch: 2, previous: first, members: [owner])
        let signed = try second.signed(by: owner)
        #expect(try signed.verifiedAsNext(after: first, deviceID: deviceID, robot: robot.publicKeys) == second)
        #expect(throws: SealedError.rosterRejected("not signed by an owner of the previous roster")) {
            try second.signed(by: self.family).verifiedAsNext(after: first, deviceID: self.deviceID, robot: self.robot.publicKeys)
        }
        // The family member holds epoch 1 only; the robot's epoch-2 frames name an epoch it cannot open.
        var opener = AppOpener(deviceID: deviceID)
        opener.hold(try epoch(first))
        var sealer = FrameSealer(identity: robot, deviceID: deviceID)
        #expect(throws: FrameRejection.unknownEpoch(2)) { try opener.open(try self.robotFrame(try self.epoch(second), sealer: &sealer), now: self.now) }
    }
}

/// A long connection's opened numbers stay small: in order they fold into one number; a gap
/// waits for its missed frames, and one never filled is given up on past the bound.
@Suite struct OpenedNumbersTests {
    @Test func numbersFoldAndGapsFillOrAreGivenUp() {
        var opened = OpenedNumbers()
        for n in 1...1_000 { opened.insert(Int64(n)) }
        #expect(opened.contiguous == 1_000 && opened.aboveGap.isEmpty && opened.contains(7))
        opened.insert(1_005)
        #expect(!opened.contains(1_003) && opened.contains(1_005))
        for n in 1_001...1_004 { opened.insert(Int64(n)) }  // the missed ones, replayed
        #expect(opened.contiguous == 1_005 && opened.aboveGap.isEmpty)
        opened.insert(1_007)  // 1_006 never comes
        for n in 1_008...(1_008 + Int64(AppOpener.numbersAboveGap)) { opened.insert(n) }
        #expect(opened.contains(1_006) && opened.aboveGap.count <= AppOpener.numbersAboveGap)
    }
}
