import Testing
@testable import RelayCore

/// Records write requests instead of touching a socket.
final class RecordingTransport: SessionTransport {
    var writeRequests = 0
    override func requestWrite() { writeRequests += 1 }
}

@Suite struct DeviceHubTests {
    var nextID: UInt64 = 0
    var transports: [RecordingTransport] = []

    mutating func session(_ role: Role, _ device: String = "d1", queue: Int = 100) -> Session {
        nextID += 1
        let s = Session(id: nextID, role: role, deviceID: DeviceID(device)!, tokenID: Int64(nextID), tokenExpiresAt: nil,
                        remoteAddress: "127.0.0.1", connectedAt: .now(), now: 0,
                        queue: SendQueue(maxMessages: queue, maxBytes: 1 << 20))
        let t = RecordingTransport()
        transports.append(t)
        s.transport = t
        return s
    }

    func drain(_ s: Session) -> [String] {
        var out: [String] = []
        while let p = s.queue.popFirst() { out.append(String(decoding: p.bytes, as: UTF8.self)) }
        return out
    }

    func hub(_ configure: (inout DeviceHub.Limits) -> Void = { _ in }) -> DeviceHub {
        var limits = DeviceHub.Limits()
        limits.replayEvents = ["mode_changed"]
        configure(&limits)
        return DeviceHub(limits: limits, clock: ManualClock(wall: UnixTime(seconds: 100)).clock)
    }

    @Test mutating func robotEventsShareOneBufferAcrossApps() {
        let h = hub()
        let robot = session(.robot)
        let apps = (0..<5).map { _ in session(.app) }
        h.attach(robot, now: 0, wallClock: UnixTime(seconds: 100))
        apps.forEach { h.attach($0, now: 0, wallClock: UnixTime(seconds: 100)) }
        apps.forEach { _ = drain($0) }
        let payload = Payload(Array(#"{"type":"event","event":"x"}"#.utf8))
        h.receive(payload, from: robot, now: 0)
        for app in apps { #expect(app.queue.first.map { $0 === payload } == true) }  // the same object, no copy
    }

    /// A hub with a robot and an app of one device attached, their greetings read.
    mutating func connectedPair() -> (DeviceHub, Session, Session) {
        let h = hub()
        let robot = session(.robot)
        let app = session(.app)
        h.attach(robot, now: 0, wallClock: UnixTime(seconds: 100))
        h.attach(app, now: 0, wallClock: UnixTime(seconds: 100))
        _ = drain(robot); _ = drain(app)
        return (h, robot, app)
    }

    /// The relay's id for each command the robot received (`"c"` and 16 hex digits).
    func relayIDs(_ sent: [String]) -> [String] {
        sent.compactMap { text in
            guard let r = text.range(of: #""id":"c"#) else { return nil }
            return String(text[text.index(r.upperBound, offsetBy: -1)...].prefix(17))
        }
    }

    @Test mutating func commandIDsAreRewrittenAndRestoredPerApp() throws {
        let h = hub()
        let robot = session(.robot)
        let a = session(.app)
        let b = session(.app)
        for s in [robot, a, b] { h.attach(s, now: 0, wallClock: UnixTime(seconds: 100)) }
        _ = drain(robot); _ = drain(a); _ = drain(b)
        h.receive(Payload(Array(#"{"type":"command","id":"1"}"#.utf8)), from: a, now: 0)
        h.receive(Payload(Array(#"{"type":"command","id":"1"}"#.utf8)), from: b, now: 0)
        let sent = drain(robot)
        let ids = relayIDs(sent)
        #expect(ids.count == 2 && ids[0] != ids[1] && ids.allSatisfy { $0.count == 17 })
        #expect(sent == ids.map { #"{"type":"command","id":"\#($0)"}"# })
        h.receive(Payload(Array(#"{"type":"response","id":"\#(ids[1])","r":"b"}"#.utf8)), from: robot, now: 0)
        h.receive(Payload(Array(#"{"type":"response","id":"\#(ids[0])","r":"a"}"#.utf8)), from: robot, now: 0)
        #expect(drain(a) == [#"{"type":"response","id":"1","r":"a"}"#])
        #expect(drain(b) == [#"{"type":"response","id":"1","r":"b"}"#])
        // A second response with the same id is unknown now.
        let observer = HubRecorder()
        h.observer = observer
        h.receive(Payload(Array(#"{"type":"response","id":"\#(ids[0])"}"#.utf8)), from: robot, now: 0)
        #expect(observer.drops == [.unknownResponse] && drain(a).isEmpty && drain(b).isEmpty)
    }

    @Test mutating func relayCommandIDsAreNotSequential() {
        let h = hub()
        let robot = session(.robot)
        let app = session(.app)
        h.attach(robot, now: 0, wallClock: UnixTime(seconds: 100))
        h.attach(app, now: 0, wallClock: UnixTime(seconds: 100))
        _ = drain(robot)
        for i in 0..<20 { h.receive(Payload(Array(#"{"type":"command","id":"\#(i)"}"#.utf8)), from: app, now: 0) }
        let ids = relayIDs(drain(robot)).compactMap { UInt64($0.dropFirst(), radix: 16) }
        #expect(ids.count == 20 && Set(ids).count == 20)
        // 64 random bits each: neighbours are never a small step apart (a counter's would be).
        #expect(zip(ids, ids.dropFirst()).allSatisfy { max($0, $1) - min($0, $1) > 1 << 20 })
    }

    @Test mutating func pendingCommandsAreBounded() {
        let h = hub { $0.pendingCommandsPerDevice = 3 }
        let robot = session(.robot)
        let app = session(.app)
        h.attach(robot, now: 0, wallClock: UnixTime(seconds: 100))
        h.attach(app, now: 0, wallClock: UnixTime(seconds: 100))
        _ = drain(robot)
        for i in 0..<5 { h.receive(Payload(Array(#"{"type":"command","id":"\#(i)"}"#.utf8)), from: app, now: 0) }
        let ids = relayIDs(drain(robot))
        _ = drain(app)
        h.receive(Payload(Array(#"{"type":"response","id":"\#(ids[0])"}"#.utf8)), from: robot, now: 0)  // forgotten
        h.receive(Payload(Array(#"{"type":"response","id":"\#(ids[4])"}"#.utf8)), from: robot, now: 0)  // kept
        #expect(drain(app) == [#"{"type":"response","id":"4"}"#])
    }

    @Test mutating func aFullRobotQueueDropsTheAppsMessageNotTheRobot() {
        let h = hub()
        let robot = session(.robot, queue: 3)
        let app = session(.app)
        let other = session(.app)
        h.attach(robot, now: 0, wallClock: UnixTime(seconds: 100))
        h.attach(app, now: 0, wallClock: UnixTime(seconds: 100))
        h.attach(other, now: 0, wallClock: UnixTime(seconds: 100))  // the robot's queue holds three presences now: full
        _ = drain(app)
        let observer = HubRecorder()
        h.observer = observer
        h.receive(Payload(Array(#"{"type":"command","id":"k1","command":"sit"}"#.utf8)), from: app, now: 0)
        h.detach(other)  // its presence does not fit either
        #expect(robot.closing == nil && h.robot(of: DeviceID("d1")!) === robot)
        #expect(drain(app) == [#"{"type":"error","code":"robot_busy","message":"the robot is not keeping up; message dropped","id":"k1"}"#])
        #expect(observer.drops == [.refused(.robotBusy), .refused(.robotBusy)])
        _ = drain(robot)
        h.receive(Payload(Array(#"{"type":"command","id":"k2"}"#.utf8)), from: app, now: 0)
        #expect(drain(robot).count == 1)
    }

    @Test(arguments: [
        // Escapes in names or routed values, duplicates, and anything that is not one object.
        #"{"type":"http\u005frequest","id":"h1"}"#, #"{"\u0074ype":"http_request"}"#,
        #"{"type":"command","id":"x","type":"http_request"}"#, #"{"type":"comm\u0061nd","id":"c7"}"#,
        #"{"type":"command","id":"a","id":"b"}"#, #"{"type":"command","id":"\u0063"}"#, #"{"type":"command","id":7}"#,
        #"{"type":"event","event":"turn\u005fcredentials"}"#, #"{"type":["event"]}"#, "not json", "[1]", #"{"a":1}x"#,
        #"{"a":1,}"#, #"{"a":NaN}"#, #"{"a":"\x"}"#, "{\"a\":\"tab\there\"}",
        String(repeating: "[", count: 70) + String(repeating: "]", count: 70),
        "{\"a\":" + String(repeating: "[", count: 70) + String(repeating: "]", count: 70) + "}",
    ])
    mutating func appFramesThatCouldBeReadTwoWaysAreRefused(_ frame: String) {
        let (h, robot, app) = connectedPair()
        h.receive(Payload(Array(frame.utf8)), from: app, now: 0)
        #expect(drain(robot).isEmpty)
        #expect(drain(app).first?.contains(#""code":"bad_message""#) == true)
    }

    @Test(arguments: ["http_request", "http_response", "http_body", "device_status", "app_presence", "turn_credentials", "error"])
    mutating func namesTheRelaySpeaksAreForbidden(_ name: String) {
        let (h, robot, app) = connectedPair()
        h.receive(Payload(Array(#"{"type":"\#(name)","id":"h1"}"#.utf8)), from: app, now: 0)
        h.receive(Payload(Array(#"{"type":"event","event":"\#(name)","data":{}}"#.utf8)), from: app, now: 0)
        #expect(drain(robot).isEmpty)
        #expect(drain(app).map { $0.contains(#""code":"forbidden_type""#) } == [true, true])
    }

    @Test mutating func fullQueueClosesOnlyThatAppWith4008() {
        let h = hub()
        let robot = session(.robot)
        let slow = session(.app, queue: 3)
        let fast = session(.app)
        for s in [robot, slow, fast] { h.attach(s, now: 0, wallClock: UnixTime(seconds: 100)) }
        for _ in 0..<10 {
            h.receive(Payload(Array(#"{"type":"event","event":"e"}"#.utf8)), from: robot, now: 0)
            _ = drain(fast)
        }
        #expect(slow.closing?.code == .slowConsumer)
        #expect(fast.closing == nil && robot.closing == nil)
        #expect(h.apps(of: DeviceID("d1")!).map(\.id) == [fast.id])
    }

    @Test mutating func rateLimitDropsThenCloses() {
        let h = hub { $0.appRate = 1; $0.appBurst = 2; $0.rateLimitCloseAfter = 5 }
        let robot = session(.robot)
        let app = session(.app)
        h.attach(robot, now: 0, wallClock: UnixTime(seconds: 100))
        h.attach(app, now: 0, wallClock: UnixTime(seconds: 100))
        _ = drain(robot); _ = drain(app)
        for _ in 0..<4 { h.receive(Payload(Array("{}".utf8)), from: app, now: 0) }
        #expect(drain(robot) == ["{}", "{}"])
        #expect(drain(app).first?.contains("rate_limited") == true)
        for _ in 0..<3 { h.receive(Payload(Array("{}".utf8)), from: app, now: 0) }
        #expect(app.closing?.code == .rateLimited)
    }

    @Test mutating func everyDroppedCommandGetsARateLimitedErrorWithItsID() {
        let h = hub { $0.appRate = 1; $0.appBurst = 1; $0.rateLimitCloseAfter = 100 }
        let robot = session(.robot)
        let app = session(.app)
        h.attach(robot, now: 0, wallClock: UnixTime(seconds: 100))
        h.attach(app, now: 0, wallClock: UnixTime(seconds: 100))
        _ = drain(robot); _ = drain(app)
        for i in 0..<4 { h.receive(Payload(Array(#"{"type":"command","id":"a\#(i)"}"#.utf8)), from: app, now: 0) }
        #expect(drain(robot).count == 1)
        let errors = drain(app)
        #expect(errors.count == 3)
        for (i, error) in errors.enumerated() {
            #expect(error.contains(#""code":"rate_limited""#) && error.contains(#""id":"a\#(i + 1)""#), "\(error)")
        }
        // Other messages still get one error per burst.
        for _ in 0..<3 { h.receive(Payload(Array("{}".utf8)), from: app, now: 0) }
        #expect(drain(app).isEmpty)
    }

    @Test mutating func replayKeepsTheLatestPerNameAndOnlyConfiguredNames() {
        let h = hub()
        let robot = session(.robot)
        h.attach(robot, now: 0, wallClock: UnixTime(seconds: 100))
        h.receive(Payload(Array(#"{"type":"event","event":"mode_changed","v":1}"#.utf8)), from: robot, now: 0)
        h.receive(Payload(Array(#"{"type":"event","event":"mode_changed","v":2}"#.utf8)), from: robot, now: 0)
        h.receive(Payload(Array(#"{"type":"event","event":"bark","v":3}"#.utf8)), from: robot, now: 0)
        let app = session(.app)
        h.attach(app, now: 0, wallClock: UnixTime(seconds: 100))
        let got = drain(app)
        #expect(got.count == 2)
        #expect(got[0].contains("device_status") && got[1] == #"{"type":"event","event":"mode_changed","v":2}"#)
    }

    @Test mutating func appCapAndPresence() {
        let h = hub { $0.maxAppsPerDevice = 2 }
        let robot = session(.robot)
        h.attach(robot, now: 0, wallClock: UnixTime(seconds: 100))
        let a = session(.app)
        let b = session(.app)
        h.attach(a, now: 0, wallClock: UnixTime(seconds: 100))
        #expect(h.hasRoomForApp(DeviceID("d1")!))
        h.attach(b, now: 0, wallClock: UnixTime(seconds: 100))
        #expect(!h.hasRoomForApp(DeviceID("d1")!))
        #expect(drain(robot).map { $0.contains("\"apps\":") } == [true, true, true])
        h.detach(a)
        #expect(drain(robot) == [#"{"type":"event","event":"app_presence","data":{"apps":1}}"#])
    }

    @Test mutating func onlyPushWorthyEventsOfDevicesWithPhonesReachThePushLogicNumbered() {
        let h = hub { $0.pushKinds = [.barkDetected, .missionCompleted, .treatDispensed, .dogDetected] }
        let observer = HubRecorder()
        h.observer = observer
        let robot = session(.robot)
        h.attach(robot, now: 0, wallClock: UnixTime(seconds: 100))
        h.receive(Payload(Array(#"{"type":"event","event":"bark_detected","data":{}}"#.utf8)), from: robot, now: 0)
        #expect(observer.pushEvents.isEmpty, "no phones registered: nothing")
        h.setPushWatched(DeviceID("d1")!, true)
        for text in [#"{"type":"event","event":"mission_progress","data":{"status":"watching"}}"#,
                     #"{"type":"event","event":"mode_changed","data":{}}"#,
                     #"{"type":"event","event":"bark_detected","data":{}}"#,
                     // The word, but not the status: read, and not a completion.
                     #"{"type":"event","event":"mission_progress","data":{"status":"watching","trick":"completed"}}"#,
                     #"{"type":"event","event":"mission_progress","data":{"status":"completed"}}"#] {
            h.receive(Payload(Array(text.utf8)), from: robot, now: 0)
        }
        // Numbered from the first push-worthy event (the bark is 1, the mode change before it was not).
        #expect(observer.pushEvents.map(\.kind) == [.barkDetected, .missionCompleted] && observer.pushEvents.map(\.seq) == [1, 3])
        h.setPushWatched(DeviceID("d1")!, false)
        h.receive(Payload(Array(#"{"type":"event","event":"bark_detected","data":{}}"#.utf8)), from: robot, now: 0)
        #expect(observer.pushEvents.count == 2)
    }
}

/// Records what the hub reports (`DeviceHubObserver`).
final class HubRecorder: DeviceHubObserver {
    var drops: [DropReason] = []
    var pushEvents: [(kind: PushKind, seq: UInt64)] = []
    func hubDropped(_ reason: DropReason) { drops.append(reason) }
    func hubPushEvent(_ device: DeviceID, kind: PushKind, message: Payload, place: (epoch: String, seq: UInt64)) {
        pushEvents.append((kind, place.seq))
    }
}
