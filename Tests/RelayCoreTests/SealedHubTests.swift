import Testing
@testable import RelayCore

/// A sealed device in the hub (docs/protocol.md "The sealed household (v1.5)"): its sealed frames
/// pass both ways as any frame does, anything that would go around the seal is refused, and a
/// new epoch reaches its apps.
@Suite struct SealedHubTests {
    var base = DeviceHubTests()

    mutating func sealedPair() -> (DeviceHub, Session, Session) {
        let (h, robot, app) = base.connectedPair()
        h.setSealed(DeviceID("d1")!, epoch: 1, announce: true)
        #expect(base.drain(app) == [#"{"type":"epoch","epoch":1}"#])
        return (h, robot, app)
    }

    @Test mutating func sealedFramesPassAndTheRestIsRefused() {
        let (h, robot, app) = sealedPair()
        let sealed = #"{"type":"sealed","v":1,"epoch":1,"kid":"k","sid":"s","n":1,"ts":1,"ct":"x","sig":"y"}"#
        h.receive(Payload(Array(sealed.utf8)), from: app, now: 0)
        #expect(base.drain(robot) == [sealed])
        h.receive(Payload(Array(sealed.utf8)), from: robot, now: 0)
        h.receive(Payload(Array(#"{"type":"lock_screen","data":{"status":"watching"}}"#.utf8)), from: robot, now: 0)
        #expect(base.drain(app) == [sealed])  // the lock screen's words are the relay's own input, not the apps'

        for text in [#"{"type":"command","id":"1","command":"treat"}"#, #"{"type":"signal","sdp":"v=0"}"#] {
            h.receive(Payload(Array(text.utf8)), from: app, now: 0)
        }
        h.receive(Payload([1, 2, 3], isBinary: true), from: app, now: 0)
        #expect(base.drain(robot) == [])
        let refusals = base.drain(app)
        #expect(refusals.count == 3 && refusals.allSatisfy { $0.contains(#""code":"sealed_device""#) }, "\(refusals)")
        #expect(refusals[0].contains(#""id":"1""#))  // the app can fail that command at once
        for text in [#"{"type":"event","event":"bark_detected","data":{}}"#, #"{"type":"response","id":"c0000000000000001"}"#] {
            h.receive(Payload(Array(text.utf8)), from: robot, now: 0)
        }
        #expect(base.drain(app) == [])
    }

    @Test mutating func onlyARisingEpochIsAnnouncedAndANewEntryStartsSealed() {
        let (h, _, app) = sealedPair()
        h.setSealed(DeviceID("d1")!, epoch: 1, announce: true)
        h.setSealed(DeviceID("d1")!, epoch: 2, announce: false)
        #expect(base.drain(app) == [])
        h.setSealed(DeviceID("d1")!, epoch: 3, announce: true)
        #expect(base.drain(app) == [#"{"type":"epoch","epoch":3}"#])
        #expect(h.sealedEpoch(of: DeviceID("d1")!) == 3)
        // A device the hub has no entry for yet starts sealed when its first socket attaches.
        h.setSealed(DeviceID("d2")!, epoch: 5, announce: true)
        let other = base.session(.app, "d2")
        h.attach(other, now: 0, wallClock: UnixTime(seconds: 100))
        _ = base.drain(other)
        h.receive(Payload(Array(#"{"type":"signal"}"#.utf8)), from: other, now: 0)
        #expect(base.drain(other).first?.contains("sealed_device") == true)
        h.setSealed(DeviceID("d2")!, epoch: nil, announce: false)
        #expect(h.sealedEpoch(of: DeviceID("d2")!) == nil)
    }

    @Test func aSealedFramesKindIsAllTheRelayReadsOfIt() {
        func name(_ text: String) -> String? {
            let bytes = Array(text.utf8)
            let envelope = Envelope.scan(bytes)
            #expect(envelope.kind == .sealed)
            return envelope.eventName.map { String(decoding: bytes[$0], as: UTF8.self) }
        }
        #expect(name(#"{"type":"sealed","v":1,"epoch":1,"n":1,"kind":"bark_detected","ct":"x","sig":"y"}"#) == "bark_detected")
        #expect(name(#"{"kind":"mode_changed","type":"sealed","ct":"x"}"#) == "mode_changed")
        #expect(name(#"{"type":"sealed","v":1,"ct":"x","sig":"y"}"#) == nil)
        #expect(name(#"{"type":"sealed","kind":"b\u0061rk_detected"}"#) == nil)  // one spelling only
        #expect(name(#"{"type":"sealed","event":"bark_detected"}"#) == nil)  // an event name is not a kind
    }

    @Test mutating func sealedFramesArePushedAndReplayedByKind() {
        let h = base.hub { $0.pushKinds = [.barkDetected, .missionCompleted] }
        let robot = base.session(.robot)
        h.attach(robot, now: 0, wallClock: UnixTime(seconds: 100))
        h.setSealed(DeviceID("d1")!, epoch: 1, announce: false)
        h.setPushWatched(DeviceID("d1")!, true)
        let observer = HubRecorder()
        h.observer = observer
        for kind in ["bark_detected", "mission_completed", "mode_changed", "robot_offline", "dog_detected"] {
            h.receive(Payload(Array(#"{"type":"sealed","v":1,"kind":"\#(kind)","ct":"x"}"#.utf8)), from: robot, now: 0)
        }
        #expect(observer.pushEvents.map(\.kind) == [.barkDetected, .missionCompleted])
        let app = base.session(.app)
        h.attach(app, now: 0, wallClock: UnixTime(seconds: 100))
        #expect(base.drain(app).contains(#"{"type":"sealed","v":1,"kind":"mode_changed","ct":"x"}"#))
    }
}
