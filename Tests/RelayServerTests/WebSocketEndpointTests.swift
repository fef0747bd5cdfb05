import Foundation
import RelayCore
@testable import RelayServer
import Testing
import WimzProtocol

/// The WebSocket endpoint in process: upgrades through its callbacks, sessions over a recording
/// socket layer, the wheel on the manual clock. (Over real sockets: RelayIntegrationTests.)
@Suite struct WebSocketEndpointTests {
    /// A relay whose store is ready with a robot and an app token of `d1`.
    private func relay(_ configure: (inout RelayConfiguration) -> Void = { _ in },
                       appExpiresIn: Int64? = nil) -> (InProcessRelay, robot: String, app: String) {
        let relay = InProcessRelay(configure)
        let robot = relay.token("d1", .robot)
        let app = relay.token("d1", .app, expiresIn: appExpiresIn)
        relay.storeReady([robot.entry, app.entry])
        return (relay, robot.secret, app.secret)
    }

    /// "online"/"offline" for a `device_status` event, else nil.
    private func deviceStatus(_ message: [String: Any]) -> String? {
        guard message["event"] as? String == "device_status", let data = message["data"] as? [String: Any],
              let online = data["online"] as? Bool else { return nil }
        return online ? "online" : "offline"
    }

    @Test func upgradesAreRefusedWithTheContractsStatusAndCode() throws {
        let (relay, robot, app) = relay { $0.maxAppsPerDevice = 1 }
        func refusal(_ target: String, _ token: String?) -> (Int, String?) {
            let response = relay.upgrade(target, token: token).refusal
            return (response?.status ?? 101, response?.json["error"] as? String)
        }
        #expect(refusal("/ws/elsewhere?device_id=d1", robot) == (404, "not_found"))
        #expect(refusal("/ws/robot", robot) == (400, "bad_request"))
        #expect(refusal("/ws/robot?device_id=d%2F1", robot) == (400, "bad_request"))
        #expect(refusal("/ws/robot?device_id=d1", nil) == (401, "missing_token"))
        #expect(refusal("/ws/robot?device_id=d1", "wimz_r_unknown") == (401, "unknown_token"))
        #expect(refusal("/ws/robot?device_id=d1", app) == (403, "wrong_role"))
        #expect(refusal("/ws/app?device_id=d2", app) == (403, "wrong_device"))
        #expect(refusal("/ws/app?device_id=d1&since=nonsense", app).0 == 400)
        let failures = relay.components.env.counters.authFailures.filter { $0.value > 0 }
        #expect(failures == [.badRequest: 3, .missingToken: 1, .unknownToken: 1, .wrongRole: 1, .wrongDevice: 1])
        let first = try #require(relay.upgrade("/ws/app?device_id=d1", token: app).socket)
        let full = try #require(relay.upgrade("/ws/app?device_id=d1", token: app).refusal)
        #expect(full.status == 429 && full.header("Retry-After") == "1")
        first.close()
        #expect(relay.upgrade("/ws/app?device_id=d1", token: app).socket != nil)  // its place is free again
        relay.components.stop.beginDrain()
        #expect(refusal("/ws/robot?device_id=d1", robot) == (503, "shutting_down"))
    }

    /// The gate corks each upgrade so that the 101 leaves with the first message: every session
    /// has one queued as it opens, written straight to a plain socket as the session opens (no
    /// WRITEABLE asked for), and the endpoint uncorks once, then.
    @Test func theFirstMessageIsWrittenAsTheSessionOpensAndUncorksOnce() throws {
        let (relay, robotToken, appToken) = relay()
        let robot = try #require(relay.upgrade("/ws/robot?device_id=d1", token: robotToken).socket)
        #expect(robot.messages.first?["event"] as? String == "app_presence" && robot.uncorks == 1)
        #expect(robot.directBytes > 0 && !robot.writablePending)
        let app = try #require(relay.upgrade("/ws/app?device_id=d1", token: appToken).socket)
        #expect(app.messages.first.map(deviceStatus) == "online" && app.uncorks == 1 && !app.writablePending)
        robot.serviceWritable()  // the app's arrival, the usual way
        #expect(robot.messages.count == 2 && robot.uncorks == 1)
        robot.receive(#"{"type":"event","event":"mode_changed","data":{"mode":"idle"}}"#)
        app.serviceWritable()
        #expect(app.messages.count == 2 && app.uncorks == 1)
    }

    /// Where lws serves TLS itself, or holds bytes of its own back, the first message waits for
    /// a WRITEABLE like any other, and the 101 is uncorked after it.
    @Test func withoutDirectWritesTheFirstMessageWaitsForWriteable() throws {
        let (relay, _, appToken) = relay()
        relay.webSocketIO.directWriteTakes = nil
        let app = try #require(relay.upgrade("/ws/app?device_id=d1", token: appToken).socket)
        #expect(app.messages.isEmpty && app.uncorks == 0 && app.writablePending && app.directBytes == 0)
        app.serviceWritable()
        #expect(app.messages.first.map(deviceStatus) == "offline" && app.uncorks == 1)
    }

    /// Bytes of a direct write the kernel did not take go first at the next WRITEABLE, before
    /// anything queued since: every frame arrives whole and in order.
    @Test(arguments: [0, 1, 5])
    func whatTheKernelDidNotTakeGoesFirst(taken: Int) throws {
        let (relay, robotToken, appToken) = relay()
        let robot = try #require(relay.upgrade("/ws/robot?device_id=d1", token: robotToken).socket)
        relay.webSocketIO.directWriteTakes = taken
        let app = try #require(relay.upgrade("/ws/app?device_id=d1", token: appToken).socket)
        #expect(app.messages.isEmpty && app.writablePending && app.directBytes == taken && app.uncorks == 1)
        robot.receive(#"{"type":"event","event":"mode_changed","data":{"mode":"idle"}}"#)
        app.serviceWritable()
        #expect(app.messages.map { $0["event"] as? String } == ["device_status", "mode_changed"])
        #expect(app.uncorks == 1 && !app.writablePending)
    }

    @Test func robotEventsReachTheAppAndAppCommandsTheRobot() throws {
        let (relay, robotToken, appToken) = relay()
        let robot = try #require(relay.upgrade("/ws/robot?device_id=d1", token: robotToken).socket)
        let app = try #require(relay.upgrade("/ws/app?device_id=d1", token: appToken).socket)
        #expect(relay.components.stop.openConnections == 2)
        app.serviceWritable()
        robot.serviceWritable()
        #expect(app.messages.first.map(deviceStatus) == "online")
        let greetings = robot.messages.count
        robot.receive(#"{"type":"event","event":"treat_dispensed","data":{"count":3}}"#)
        app.receive(#"{"type":"command","command":"dispense_treat","id":"c1"}"#)
        app.serviceWritable()
        robot.serviceWritable()
        let event = try #require(app.messages.last)
        #expect(event["event"] as? String == "treat_dispensed" && (event["data"] as? [String: Any])?["count"] as? Int == 3)
        // The relay gives the command an id of its own (two apps may use the same one) and
        // hands the robot's response back under the app's.
        let command = try #require(robot.messages.dropFirst(greetings).first)
        let relayID = try #require(command["id"] as? String)
        #expect(command["command"] as? String == "dispense_treat" && relayID != "c1")
        robot.receive(#"{"type":"response","id":"\#(relayID)","ok":true}"#)
        app.serviceWritable()
        #expect(app.messages.last?["type"] as? String == "response" && app.messages.last?["id"] as? String == "c1")
        robot.close()
        app.serviceWritable()
        #expect(app.messages.last.map(deviceStatus) == "offline")
        #expect(relay.components.stop.openConnections == 1)
    }

    @Test func fragmentsAreJoinedAndOversizedOrInvalidMessagesClose() throws {
        let (relay, robotToken, appToken) = relay { $0.maxMessageBytes = 1024 }
        let robot = try #require(relay.upgrade("/ws/robot?device_id=d1", token: robotToken).socket)
        let app = try #require(relay.upgrade("/ws/app?device_id=d1", token: appToken).socket)
        app.serviceWritable()
        let before = app.messages.count
        // One frame in two chunks, then a message in two frames.
        robot.receive(#"{"type":"event","event":"#, last: false, remaining: 25)
        robot.receive(#""bark_detected","data":{}}"#, first: false)
        robot.receive(#"{"type":"event","#, last: false)
        robot.receive(#""event":"mode_changed","data":{}}"#, first: false)
        app.serviceWritable()
        #expect(app.messages.dropFirst(before).compactMap { $0["event"] as? String } == ["bark_detected", "mode_changed"])

        // Over the limit as soon as the frame's announced length says so.
        robot.receive(String(repeating: " ", count: 100), last: false, remaining: 1000)
        // The rest of that message is ignored, and the robot is gone for the app at once (the
        // close detaches).
        robot.receive(String(repeating: " ", count: 1000), first: false)
        app.serviceWritable()
        #expect(app.messages.last.map(deviceStatus) == "offline")
        relay.tick(robot)
        #expect(robot.closeFrame?.code == .tooLarge)
        // Text that is not UTF-8.
        let app2 = try #require(relay.upgrade("/ws/app?device_id=d1", token: appToken).socket)
        app2.receive([0x7B, 0xC3, 0x28, 0x7D])
        relay.tick(app2)
        #expect(app2.closeFrame?.code == .invalidPayload)
        // Each close counted once, when its socket closes.
        #expect(relay.components.env.counters.closes.filter { $0.value > 0 } == [CloseCode.tooLarge.rawValue: 1, CloseCode.invalidPayload.rawValue: 1])
        // Both closes were the relay's: their sockets linger until the peers have the close frame.
        #expect(robot.lingered && app2.lingered)
        // A close the peer began does not.
        let app3 = try #require(relay.upgrade("/ws/app?device_id=d1", token: appToken).socket)
        app3.close()
        #expect(!app3.lingered)
    }

    @Test func theWheelPingsDropsTheSilentAndClosesExpiredTokens() throws {
        let (relay, robotToken, appToken) = relay({ $0.pingIntervalSeconds = 10 }, appExpiresIn: 25)
        let robot = try #require(relay.upgrade("/ws/robot?device_id=d1", token: robotToken).socket)
        let app = try #require(relay.upgrade("/ws/app?device_id=d1", token: appToken).socket)
        relay.tick(robot, app)
        #expect(robot.pings == 0)
        // Within the first interval (a random point of it) each gets a ping.
        relay.clock.advance(seconds: 10.05)
        relay.tick(robot, app)
        #expect(robot.pings == 1 && app.pings == 1)
        // The app answers its pings and keeps talking; the robot is silent.
        for _ in 0..<3 {
            relay.clock.advance(seconds: 5)
            if let connection = app.connection { relay.components.webSocket.pong(connection) }
            relay.tick(robot, app)
        }
        #expect(robot.dropped && robot.closeFrame == nil)  // no close handshake with a silent peer
        robot.close()
        #expect(!robot.lingered)  // nothing of ours is on its way to a silent peer
        #expect(!app.dropped && app.closeFrame == nil)
        #expect(relay.components.env.counters.keepaliveTimeouts == 1)
        // The app's token expires at 25 s: closed with 4001-style revocation, "token expired".
        relay.clock.advance(seconds: 6)
        relay.tick(app)
        relay.tick(app)
        #expect(app.closeFrame?.code == .revoked && app.closeFrame?.reason == "token expired")
    }

    /// After the store monitor reconnected (notifications may have been missed) the tokens in use
    /// are read again: a socket whose token was removed meanwhile closes with 4003, and one
    /// opened after the recheck was asked for is not judged by it.
    @Test func aRecheckAfterAReconnectClosesWhatWasRevokedMeanwhile() throws {
        let relay = InProcessRelay()
        let kept = relay.token("d1", .app), removed = relay.token("d1", .app), later = relay.token("d1", .app)
        relay.storeReady([kept.entry, removed.entry, later.entry])
        let keptSocket = try #require(relay.upgrade("/ws/app?device_id=d1", token: kept.secret).socket)
        let removedSocket = try #require(relay.upgrade("/ws/app?device_id=d1", token: removed.secret).socket)
        relay.components.store.handle(.credentialsMayBeStale)
        let laterSocket = try #require(relay.upgrade("/ws/app?device_id=d1", token: later.secret).socket)
        relay.components.store.handle(.credentialsRechecked(ids: [kept.entry.token.id, removed.entry.token.id],
                                                            entries: [kept.entry]))
        relay.tick(keptSocket, removedSocket, laterSocket)
        #expect(removedSocket.closeFrame?.code == .revoked)
        #expect(keptSocket.closeFrame == nil && laterSocket.closeFrame == nil)
        // The removed token is no token from then on, without asking the store.
        #expect(relay.upgrade("/ws/app?device_id=d1", token: removed.secret).refusal?.status == 401)
    }
}
