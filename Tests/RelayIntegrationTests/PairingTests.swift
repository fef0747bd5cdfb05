import Foundation
import Testing
import RelayTestSupport

/// Pairing, routing and relay-originated messages over real sockets.
@Suite struct PairingTests {
    @Test func robotEventsReachEveryAppVerbatimAndPresenceIsAnnounced() throws {
        let f = try RelayFixture()
        let robot = try f.robot()
        let presence0 = try robot.receiveJSON()
        #expect(presence0.eventName == "app_presence")
        #expect(presence0.dataObject?["apps"] as? Int == 0)

        let app1 = try f.app()
        let status = try app1.receiveJSON()
        #expect(status.eventName == "device_status")
        #expect(status.dataObject?["device_id"] as? String == "dev1")
        #expect(status.dataObject?["online"] as? Bool == true)
        #expect((status.dataObject?["since"] as? String)?.hasSuffix("Z") == true)
        #expect(try robot.receiveJSON().dataObject?["apps"] as? Int == 1)
        let app2 = try f.app()
        _ = try app2.receiveJSON()
        #expect(try robot.receiveJSON().dataObject?["apps"] as? Int == 2)

        // Byte for byte, odd spacing and key order included.
        let event = #"{ "data" : {"progress": 0.5, "nested": {"type":"command"}}, "type":"event","event":"bark_detected","timestamp":"2026-11-22T06:00:00Z"}"#
        try robot.send(event)
        #expect(try app1.receive().text == event)
        #expect(try app2.receive().text == event)

        // Non-JSON text and binary also go to every app, opcode kept.
        try robot.send("not json at all")
        #expect(try app1.receive().text == "not json at all")
        #expect(try app2.receive().text == "not json at all")
        try robot.sendBinary([0, 1, 2, 255])
        let binary = try app1.receive()
        #expect(binary.isBinary && binary.payload == [0, 1, 2, 255])
        #expect(try app2.receive().isBinary)

        app2.close()
        #expect(try robot.receiveJSON().dataObject?["apps"] as? Int == 1)
    }

    @Test func appsOfOtherDevicesReceiveNothing() throws {
        let f = try RelayFixture(devices: ["dev1", "dev2"])
        let robot = try f.robot("dev1")
        let other = try f.app("dev2")
        #expect(try other.receiveJSON().dataObject?["online"] as? Bool == false)
        let mine = try f.app("dev1")
        _ = try mine.receiveJSON()
        try robot.send(#"{"type":"event","event":"treat_dispensed","data":{}}"#)
        #expect(try mine.receiveJSON().eventName == "treat_dispensed")
        #expect(other.expectSilence(0.5))
    }

    @Test func deviceStatusFollowsTheRobot() throws {
        let f = try RelayFixture()
        let app = try f.app()
        let offline = try app.receiveJSON()
        #expect(offline.eventName == "device_status" && offline.dataObject?["online"] as? Bool == false)
        let robot = try f.robot()
        let online = try app.receiveJSON()
        #expect(online.eventName == "device_status" && online.dataObject?["online"] as? Bool == true)
        robot.close()
        let gone = try app.receiveJSON()
        #expect(gone.eventName == "device_status" && gone.dataObject?["online"] as? Bool == false)
    }

    @Test func appMessagesGoToTheRobotAndOfflineGivesAnError() throws {
        let f = try RelayFixture()
        let app = try f.app()
        _ = try app.receiveJSON()
        try app.send(#"{"type":"command","id":"42","command":"sit"}"#)
        let error = try app.receiveJSON()
        #expect(error["type"] as? String == "error")
        #expect(error["code"] as? String == "device_offline")
        #expect(error["id"] as? String == "42")
        // v1.2: an id that is not a plain string is refused before anything else.
        try app.send(#"{"type":"command","id":42,"command":"sit"}"#)
        #expect(try app.receiveJSON()["code"] as? String == "bad_message")
        try app.send(#"{"type":"webrtc_offer","sdp":"v=0"}"#)
        let plain = try app.receiveJSON()
        #expect(plain["code"] as? String == "device_offline" && plain["id"] == nil)

        let robot = try f.robot()
        _ = try robot.receiveJSON()  // app_presence
        _ = try app.receiveJSON()  // device_status online
        let offer = #"{"type":"webrtc_offer","sdp":"v=0\r\na=x"}"#
        try app.send(offer)
        #expect(try robot.receive().text == offer)
        try app.sendBinary([9, 8, 7])
        let bin = try robot.receive()
        #expect(bin.isBinary && bin.payload == [9, 8, 7])
    }

    @Test func responsesGoOnlyToTheAppThatSentTheCommandEvenWithTheSameID() throws {
        let f = try RelayFixture()
        let robot = try f.robot()
        _ = try robot.receiveJSON()
        let a = try f.app()
        let b = try f.app()
        _ = try a.receiveJSON()
        _ = try b.receiveJSON()
        _ = try robot.receiveJSON()
        _ = try robot.receiveJSON()

        try a.send(#"{"type":"command","id":"7","command":"sit","by":"a"}"#)
        try b.send(#"{"type":"command","id":"7","command":"down","by":"b"}"#)
        // Two sockets: the relay may serve them in either order, so tell the commands apart by sender.
        let received = [try robot.receiveJSON(), try robot.receiveJSON()]
        let c1 = try #require(received.first { $0["by"] as? String == "a" })
        let c2 = try #require(received.first { $0["by"] as? String == "b" })
        let id1 = try #require(c1["id"] as? String)
        let id2 = try #require(c2["id"] as? String)
        #expect(id1 != id2)  // the relay keeps the two apps' "7" apart on the robot leg
        #expect(c1["command"] as? String == "sit" && c2["command"] as? String == "down")

        // The robot answers b's first, echoing the id verbatim.
        try robot.send(#"{"type":"response","id":"\#(id2)","ok":true,"for":"b"}"#)
        try robot.send(#"{"type":"response","id":"\#(id1)","ok":true,"for":"a"}"#)
        let ra = try a.receiveJSON()
        let rb = try b.receiveJSON()
        #expect(ra["for"] as? String == "a" && ra["id"] as? String == "7")
        #expect(rb["for"] as? String == "b" && rb["id"] as? String == "7")
        // Exactly the app's original bytes come back around the id.
        try a.send(#"{"type":"command","id": "99" ,"x":1}"#)
        let c3 = try robot.receive().text
        let relayID = try #require(try JSONSerialization.jsonObject(with: Data(c3.utf8)) as? [String: Any])["id"] as! String
        #expect(c3 == #"{"type":"command","id": "\#(relayID)" ,"x":1}"#)
        try robot.send(#"{"type":"response","id":"\#(relayID)","v":[1,2]}"#)
        #expect(try a.receive().text == #"{"type":"response","id":"99","v":[1,2]}"#)

        // A response nobody asked for goes nowhere.
        try robot.send(#"{"type":"response","id":"c999999","stray":true}"#)
        #expect(a.expectSilence(0.4) && b.expectSilence(0.1))
    }

    @Test func latestReplayedEventsReachAppsThatConnectLater() throws {
        let f = try RelayFixture()
        let robot = try f.robot()
        _ = try robot.receiveJSON()
        let first = #"{"type":"event","event":"mode_changed","data":{"mode":"idle"}}"#
        let latest = #"{"type":"event","event":"mode_changed","data":{"mode":"training"}}"#
        let progress = #"{"type":"event","event":"mission_progress","data":{"step":3}}"#
        let audio = #"{"type":"event","event":"audio_state","data":{"on":true}}"#
        let notReplayed = #"{"type":"event","event":"bark_detected","data":{}}"#
        for m in [first, progress, latest, audio, notReplayed] { try robot.send(m) }
        usleep(200_000)
        let app = try f.app()
        #expect(try app.receiveJSON().eventName == "device_status")
        var replayed: [String] = []
        for _ in 0..<3 { replayed.append(try app.receive().text) }
        #expect(Set(replayed) == Set([latest, progress, audio]))
        #expect(app.expectSilence(0.4))
    }

    @Test func newerRobotReplacesTheOlderWith4001() throws {
        let f = try RelayFixture()
        let old = try f.robot()
        _ = try old.receiveJSON()
        let app = try f.app()
        _ = try app.receiveJSON()
        _ = try old.receiveJSON()
        let new = try f.robot(useHeader: false)
        #expect(old.waitForClose() == 4001)
        #expect(old.closeFrame?.closeReason == "replaced")
        #expect(try new.receiveJSON().dataObject?["apps"] as? Int == 1)
        try app.send(#"{"type":"ping_robot"}"#)
        #expect(try new.receive().text == #"{"type":"ping_robot"}"#)
        #expect(try f.waitForAudit { $0.event == "robot_replaced" && $0.device == "dev1" })
    }

    @Test func fragmentedAndLargeMessagesKeepBoundariesAndOpcodes() throws {
        let f = try RelayFixture()
        let robot = try f.robot()
        _ = try robot.receiveJSON()
        let app = try f.app()
        _ = try app.receiveJSON()
        _ = try robot.receiveJSON()
        let big = Array(#"{"type":"event","event":"snapshot","data":""#.utf8) + [UInt8](repeating: UInt8(ascii: "x"), count: 60_000) + Array(#""}"#.utf8)
        try robot.sendFragmented(opcode: 1, payload: big, parts: 5)
        try robot.sendFragmented(opcode: 2, payload: [UInt8](repeating: 7, count: 3000), parts: 3)
        try robot.send("after")
        let m1 = try app.receive()
        #expect(!m1.isBinary && m1.payload == big)
        let m2 = try app.receive()
        #expect(m2.isBinary && m2.payload == [UInt8](repeating: 7, count: 3000))
        #expect(try app.receive().text == "after")
        try app.sendFragmented(opcode: 1, payload: Array(#"{"type":"command","id":"f1","x":"yyyy"}"#.utf8), parts: 4)
        let command = try robot.receiveJSON()
        #expect(command["x"] as? String == "yyyy")
    }
}
