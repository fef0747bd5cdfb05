import Foundation
import Testing
import RelayTestSupport

/// Message size, rate limits, slow consumers and keepalive.
@Suite struct LimitsTests {
    @Test func oversizedAppMessageClosesItWith1009() throws {
        let f = try RelayFixture(environment: ["WIMZ_MAX_MESSAGE_BYTES": "1024"])
        let (robot, app) = try f.robotAndApp()
        let limit = #"{"type":"note","text":""# + String(repeating: "x", count: 1024 - 25) + #""}"#
        #expect(limit.utf8.count == 1024)
        try app.send(limit)
        #expect(try robot.receive().text == limit)
        try app.sendFragmented(opcode: 1, payload: Array(String(repeating: "y", count: 1500).utf8), parts: 3)
        #expect(app.waitForClose() == 1009)
        // The robot got the presence update, never the oversized message.
        let next = try robot.receiveJSON()
        #expect(next.eventName == "app_presence")
    }

    /// RFC 6455 §8.1, checked by the relay (not lws): a text message that is not UTF-8 closes
    /// its socket with 1007, whole or fragmented, robot or app; non-ASCII text passes unchanged.
    @Test func textThatIsNotUTF8ClosesWith1007() throws {
        let f = try RelayFixture()
        let (robot, app) = try f.robotAndApp()
        let accents = #"{"type":"event","event":"note","data":{"text":"Grüße, 🐕 — ½"}}"#
        try robot.send(accents)
        #expect(try app.receive().text == accents)
        // An overlong '/' (C0 AF) in the second fragment, after valid ASCII.
        let broken = Array(#"{"type":"command","command":"x","id":"1","text":""#.utf8) + [0xC0, 0xAF] + Array(#""}"#.utf8)
        try app.sendFragmented(opcode: 1, payload: broken, parts: 2)
        #expect(app.waitForClose() == 1007)
        // A surrogate half (ED A0 80) in a whole event from the robot.
        try robot.sendFrame(opcode: 1, payload: Array(#"{"type":"event","event":"note","data":""#.utf8) + [0xED, 0xA0, 0x80, 0x22, 0x7D])
        #expect(robot.waitForClose() == 1007)
    }

    @Test func floodingAppIsRateLimitedAndTheRobotSeesOnlyTheAllowance() throws {
        let f = try RelayFixture(environment: ["WIMZ_APP_RATE_LIMIT": "2", "WIMZ_APP_RATE_BURST": "5"])
        let robot = try f.robot()
        _ = try robot.receiveJSON()
        let app = try f.app()
        _ = try app.receiveJSON()
        _ = try robot.receiveJSON()
        for i in 0..<20 { try app.send(#"{"type":"command","id":"\#(i)","c":"x"}"#) }
        let error = try app.receiveJSON()
        #expect(error["type"] as? String == "error" && error["code"] as? String == "rate_limited")
        var forwarded = 0
        robot.socket.setTimeout(0.5)
        while (try? robot.receive()) != nil { forwarded += 1 }
        #expect(forwarded >= 5 && forwarded <= 7)
    }

    @Test func slowAppIsClosedWith4008WithoutDelayingTheRobotOrOtherApps() throws {
        let f = try RelayFixture(environment: ["WIMZ_SEND_QUEUE_MESSAGES": "64", "WIMZ_SEND_QUEUE_BYTES": "262144"])
        let robot = try f.robot()
        _ = try robot.receiveJSON()
        let slow = try f.app()
        slow.socket.setReceiveBuffer(65536)
        let fast = try f.app()
        _ = try fast.receiveJSON()
        let chunk = String(repeating: "z", count: 16_000)
        // The robot sends until the relay culls the slow app, which reads nothing meanwhile; the
        // fast app keeps up with every message.
        var sent = 0
        while try queueFullDrops(f) == 0, sent < 1_000 {
            try robot.send(#"{"type":"event","event":"frame","data":{"i":\#(sent),"pad":"\#(chunk)"}}"#)
            sent += 1
            while try fast.receiveJSON().eventName != "frame" {}
        }
        #expect(try queueFullDrops(f) == 1, "the slow app was never culled (\(sent) messages sent)")
        // The slow app now reads its backlog and finds the 4008 close behind it. It must start at
        // once: a close that cannot get out is cut off 5 s after it was let out (CloseWatch), and
        // then the app sees the connection end without the code (a CI run flooded on for longer).
        #expect(slow.waitForClose(timeout: 30) == 4008)
        #expect(try f.waitForAudit { $0.event == "app_disconnected" && $0.details.contains("slow consumer") })
        // The robot is still connected and routed.
        try robot.send(#"{"type":"event","event":"still_here","data":{}}"#)
        #expect(try fast.receive(until: { $0.eventName == "still_here" }).eventName == "still_here")
    }

    /// `wimz_drops_total{reason="queue_full"}`: messages not queued because a consumer was culled.
    private func queueFullDrops(_ f: RelayFixture) throws -> Int {
        let metrics = try HTTPTestClient.get(port: f.port, path: "/metrics").text
        let prefix = #"wimz_drops_total{reason="queue_full"} "#
        guard let line = metrics.split(separator: "\n").first(where: { $0.hasPrefix(prefix) }) else { return 0 }
        return Int(line.dropFirst(prefix.count)) ?? -1
    }

    @Test func serverPingsAndDropsPeersSilentForTwoIntervals() throws {
        let f = try RelayFixture(environment: ["WIMZ_PING_INTERVAL": "1"])
        let answering = try f.app()
        let silent = try f.app()
        silent.answerPings = false
        // The answering client sees pings and stays; the silent one is dropped after ~2 s.
        let start = Date()
        var pings = 0
        answering.socket.setTimeout(0.5)
        silent.socket.setTimeout(0.2)
        var silentGone = false
        while Date().timeIntervalSince(start) < 5 {
            if let frame = try? answering.readFrame(), frame.opcode == 9 {
                pings += 1
                try answering.sendFrame(opcode: 10, payload: frame.payload)
            }
            if !silentGone {
                do { _ = try silent.readFrame() } catch let e as TestSetupError where e.description.contains("timed out") {
                } catch { silentGone = true }
            }
        }
        #expect(pings >= 2)
        #expect(silentGone)
        try answering.send(#"{"type":"hello"}"#)
        #expect(try answering.receiveJSON()["code"] as? String == "device_offline")
    }
}
