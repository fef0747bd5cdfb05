import Foundation
import Testing
import RelayCore
import RelayStore
import RelayTestSupport

/// Revocation, disabling, graceful shutdown and audit durability.
@Suite struct LifecycleTests {
    @Test func revokingATokenFromTheCLIClosesItsSocketsWithin1sWith4003() throws {
        let f = try RelayFixture()
        let robot = try f.robot()
        _ = try robot.receiveJSON()
        let app = try f.app()
        _ = try app.receiveJSON()
        let appTokenID = f.tokenIDs[f.appTokens["dev1"]!]!
        let revoke = try Subprocess.cli(["token", "revoke", String(appTokenID)], databaseURL: f.database.url)
        #expect(revoke.status == 0)
        let revokedAt = Date()
        #expect(app.waitForClose(timeout: 3) == 4003)
        #expect(Date().timeIntervalSince(revokedAt) < 1.0)
        // The robot (another token) stays up.
        #expect(try robot.receive(until: { $0.dataObject?["apps"] as? Int == 0 }).eventName == "app_presence")
    }

    @Test func disablingADeviceClosesAllItsSocketsWith4003() throws {
        let f = try RelayFixture(devices: ["dev1", "dev2"])
        let robot = try f.robot()
        let app = try f.app()
        let bystander = try f.robot("dev2")
        #expect(try bystander.receiveJSON().eventName == "app_presence")
        #expect(try Subprocess.cli(["device", "disable", "dev1"], databaseURL: f.database.url).status == 0)
        let disabledAt = Date()
        #expect(robot.waitForClose(timeout: 3) == 4003)
        #expect(app.waitForClose(timeout: 3) == 4003)
        #expect(Date().timeIntervalSince(disabledAt) < 1.5)
        #expect(bystander.expectSilence(0.3))
    }

    @Test func sigtermSends1001ToEverySocketAndAuditsTheDisconnects() throws {
        let f = try RelayFixture()
        let robot = try f.robot()
        _ = try robot.receiveJSON()
        let app = try f.app()
        _ = try app.receiveJSON()
        try robot.send(#"{"type":"event","event":"bark_detected","data":{}}"#)
        _ = try app.receive()
        #expect(f.relay.stop(signal: SIGTERM) == 0)
        #expect(robot.closeFrame == nil)
        #expect(robot.waitForClose() == 1001)
        #expect(app.waitForClose() == 1001)
        let events = try f.auditEvents()
        let robotGone = events.first { $0.event == "robot_disconnected" }
        #expect(robotGone?.details.contains("\"messages_in\": 1") == true)
        #expect(robotGone?.details.contains("duration_s") == true)
        #expect(events.contains { $0.event == "app_disconnected" && $0.details.contains("1001") })
        #expect(events.filter { $0.event.hasSuffix("_connected") }.count == 2)
    }

    /// Has the relay read `tokens` (a request that changes nothing): the tokens a relay holds
    /// through an outage are those its clients presented before it.
    static func present(_ tokens: [String], to relay: RelayDaemon) throws {
        for token in tokens {
            let status = try HTTPTestClient.get(port: relay.port, path: "/api/devices/dev1/status",
                                                headers: ["Authorization": "Bearer \(token)"])
            #expect(status.status == 200)
        }
    }

    @Test func auditEventsSurviveADatabaseOutageAndAShutdownDuringIt() throws {
        let cluster = try PrivateCluster()
        #expect(try Subprocess.cli(["migrate"], databaseURL: cluster.url).status == 0)
        #expect(try Subprocess.cli(["device", "add", "dev1"], databaseURL: cluster.url).status == 0)
        let robotToken = try Subprocess.cli(["token", "issue", "--device", "dev1", "--role", "robot"], databaseURL: cluster.url).lastLine
        let appToken = try Subprocess.cli(["token", "issue", "--device", "dev1", "--role", "app"], databaseURL: cluster.url).lastLine
        let spool = try TestEnvironment.scratchDirectory("spool")
        let environment = ["WIMZ_SPOOL_DIR": spool, "WIMZ_TURN_URLS": "turn:127.0.0.1:3478?transport=udp",
                           "WIMZ_TURN_SECRET": "static-secret-for-tests-0123456789"]
        var relay = try RelayDaemon(databaseURL: cluster.url, environment: environment)
        try relay.waitUntilReady()
        #expect(relay.waitForLog(containing: "credentials_loaded") != nil)
        try Self.present([robotToken, appToken], to: relay)

        // The database goes away; cached tokens keep working and events keep happening.
        try cluster.stop()
        #expect(relay.waitForLog(containing: "\"state\":\"unavailable\"") != nil)
        let robot = try WebSocketTestClient.connect(port: relay.port, role: "robot", device: "dev1", token: robotToken)
        let app = try WebSocketTestClient.connect(port: relay.port, role: "app", device: "dev1", token: appToken)
        _ = try app.receiveJSON()
        app.close()
        _ = app.waitForClose()
        do { _ = try WebSocketTestClient.connect(port: relay.port, role: "app", device: "dev1", token: "wimz_a_wrong") } catch {}
        // TURN credentials keep being issued (a static secret): the robot's push on connect and two fetches.
        _ = try robot.receive(until: { ($0["event"] as? String) == "turn_credentials" })
        // What the timeline keeps (v1.6) waits too: the robot's connect, a bark and a treat.
        try robot.send(#"{"type":"event","event":"bark_detected","data":{"dog_name":"Elsa"}}"#)
        try robot.send(#"{"type":"event","event":"treat_dispensed","data":{"daily_count":1}}"#)
        for token in [robotToken, appToken] {
            let fetched = try HTTPTestClient.get(port: relay.port, path: "/api/turn/credentials",
                                                 headers: ["Authorization": "Bearer \(token)"])
            #expect(fetched.status == 200)
        }

        // Stopped while the database is still down: what is not stored goes to the spool file.
        #expect(relay.stop(signal: SIGTERM) == 0)
        _ = robot.waitForClose()
        let spoolFile = spool + "/audit-spool.jsonl"
        #expect(FileManager.default.fileExists(atPath: spoolFile))

        // Database back, relay restarted: the spool is replayed, nothing lost, nothing doubled.
        try cluster.start()
        relay = try RelayDaemon(databaseURL: cluster.url, environment: environment)
        #expect(relay.waitForLog(containing: "audit_spool_replayed", timeout: 20) != nil)
        let db = try PGConnection(conninfo: cluster.url)
        let rows = try db.execute("SELECT event, count(*) FROM audit_log GROUP BY event").rows
        let counts = Dictionary(uniqueKeysWithValues: rows.map { ($0[0]!, Int($0[1]!)!) })
        #expect(counts["robot_connected"] == 1)
        #expect(counts["app_connected"] == 1)
        #expect(counts["app_disconnected"] == 1)
        #expect(counts["robot_disconnected"] == 1)
        #expect(counts["auth_failed"] == 1)
        #expect(counts["turn_credential_issued"] == 3)
        // Every issuance row is there once, with the id of its audit event.
        let issuances = try db.execute("""
            SELECT i.via, count(*) FROM turn_issuances i JOIN audit_log a ON a.event_id = i.issuance_id
            WHERE a.event = 'turn_credential_issued' GROUP BY i.via ORDER BY i.via
            """).rows
        #expect(issuances.map { [$0[0]!, $0[1]!] } == [["http", "2"], ["push", "1"]])
        #expect(try db.execute("SELECT count(*) FROM turn_issuances").first?[0] == "3")
        #expect(!FileManager.default.fileExists(atPath: spoolFile))
        // The timeline's entries were spooled at the stop and stored after the restart, once each.
        let deadline = Date().addingTimeInterval(20)
        while try Self.timeline(db) != Self.keptThroughTheOutage, Date() < deadline { usleep(50_000) }
        #expect(try Self.timeline(db) == Self.keptThroughTheOutage)
        let metrics = try HTTPTestClient.get(port: relay.port, path: "/metrics").text
        #expect(metrics.contains("\nwimz_timeline_spool_entries_read_total \(Self.keptThroughTheOutage.count)\n"))
        relay.stop()
        #expect(!FileManager.default.fileExists(atPath: spool + "/timeline-spool.jsonl"))
    }

    static let keptThroughTheOutage = ["robot_online", "bark_detected", "treat_dispensed"]

    /// The device's timeline entries' names, in their order.
    static func timeline(_ db: PGConnection) throws -> [String] {
        try db.execute("SELECT event FROM timeline_entries WHERE device_id = 'dev1' ORDER BY number").rows.map { $0[0]! }
    }

    /// Once `/readyz` is ready after the database came back, requests answered from the database
    /// are answered: no connection a thread held before the outage is the one to find out.
    @Test func theFirstRequestsAfterTheDatabaseReturnedAreAnswered() throws {
        let cluster = try PrivateCluster()
        #expect(try Subprocess.cli(["migrate"], databaseURL: cluster.url).status == 0)
        #expect(try Subprocess.cli(["device", "add", "dev1"], databaseURL: cluster.url).status == 0)
        let appToken = try Subprocess.cli(["token", "issue", "--device", "dev1", "--role", "app"], databaseURL: cluster.url).lastLine
        let relay = try RelayDaemon(databaseURL: cluster.url, environment: ["WIMZ_ADMIN_TOKEN": "admin-token-for-tests-0123456789"])
        try relay.waitUntilReady()
        try Self.present([appToken], to: relay)
        for round in 0..<2 {
            let mark = relay.log.count
            try cluster.stop()
            #expect(relay.waitForLog(containing: "\"state\":\"unavailable\"", after: mark) != nil)
            try cluster.start()
            try relay.waitUntilReady(timeout: 20)
            let admin = try HTTPTestClient.get(port: relay.port, path: "/admin/devices",
                                               headers: ["Authorization": "Bearer admin-token-for-tests-0123456789"])
            #expect(admin.status == 200, "round \(round): \(admin.status)")
            let status = try HTTPTestClient.get(port: relay.port, path: "/api/devices/dev1/status",
                                                headers: ["Authorization": "Bearer \(appToken)"])
            #expect(status.status == 200, "round \(round): \(status.status)")
        }
        relay.stop()
    }

    @Test func auditEventsWrittenAfterABriefOutageWithoutRestart() throws {
        let cluster = try PrivateCluster()
        #expect(try Subprocess.cli(["migrate"], databaseURL: cluster.url).status == 0)
        #expect(try Subprocess.cli(["device", "add", "dev1"], databaseURL: cluster.url).status == 0)
        let appToken = try Subprocess.cli(["token", "issue", "--device", "dev1", "--role", "app"], databaseURL: cluster.url).lastLine
        let relay = try RelayDaemon(databaseURL: cluster.url)
        try relay.waitUntilReady()
        #expect(relay.waitForLog(containing: "credentials_loaded") != nil)
        try Self.present([appToken], to: relay)
        try cluster.stop()
        #expect(relay.waitForLog(containing: "\"state\":\"unavailable\"") != nil)
        for _ in 0..<3 {
            let app = try WebSocketTestClient.connect(port: relay.port, role: "app", device: "dev1", token: appToken)
            app.close()
            _ = app.waitForClose()
        }
        try cluster.start()
        let db = try PGConnection(conninfo: cluster.url)
        var stored = 0
        for _ in 0..<100 {
            stored = Int(try db.execute("SELECT count(*) FROM audit_log WHERE event IN ('app_connected','app_disconnected')").first![0]!)!
            if stored == 6 { break }
            usleep(200_000)
        }
        #expect(stored == 6)
        relay.stop()
    }
}
