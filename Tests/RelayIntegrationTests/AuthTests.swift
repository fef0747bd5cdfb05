import Foundation
import Testing
import RelayCore
import RelayTestSupport

/// Every rejection happens before the upgrade, as plain HTTP with the contract's status.
@Suite struct AuthTests {
    func refused(_ f: RelayFixture, _ path: String, headers: [String: String] = [:]) throws -> HTTPTestResponse {
        do {
            _ = try WebSocketTestClient(port: f.port, path: path, headers: headers)
        } catch let refused as WebSocketTestClient.UpgradeRefused {
            return refused.response
        }
        throw TestSetupError("upgrade to \(path) was accepted")
    }

    @Test func malformedRequestsGet400Or404() throws {
        let f = try RelayFixture()
        let token = f.appTokens["dev1"]!
        for path in ["/ws/app?token=\(token)", "/ws/app?device_id=&token=\(token)",
                     "/ws/app?device_id=bad%20id&token=\(token)", "/ws/app?device_id=\(String(repeating: "a", count: 65))&token=\(token)",
                     "/ws/app?device_id=a%22b&token=\(token)"] {
            let r = try refused(f, path)
            #expect(r.status == 400, "\(path)")
            #expect(try r.json()["error"] as? String == "bad_request")
        }
        #expect(try refused(f, "/ws/other?device_id=dev1&token=\(token)").status == 404)
        // The invalid id is neither logged nor stored.
        #expect(!f.relay.log.joined().contains("bad id") && !f.relay.log.joined().contains("a\"b"))
    }

    @Test func missingUnknownExpiredOrRevokedTokensGet401WithChallenge() throws {
        let f = try RelayFixture()
        let missing = try refused(f, "/ws/app?device_id=dev1")
        #expect(missing.status == 401)
        // An upgrade is HTTP/1.1 (RFC 6455 §4.1), and so is its refusal: WebSocket clients that
        // reject "HTTP/1.0" would otherwise never see the status.
        #expect(missing.version == "HTTP/1.1")
        #expect(missing.headers["www-authenticate"]?.hasPrefix("Bearer") == true)
        #expect(try missing.json()["error"] as? String == "missing_token")
        let unknown = try refused(f, "/ws/app?device_id=dev1&token=wimz_a_doesnotexist")
        #expect(unknown.status == 401)
        #expect(try unknown.json()["error"] as? String == "unknown_token")
        // The code again in a header, for clients not handed a refused upgrade's body (URLSession).
        #expect(missing.headers["wimz-error"] == "missing_token" && unknown.headers["wimz-error"] == "unknown_token")
        let bearerUnknown = try refused(f, "/ws/robot?device_id=dev1", headers: ["Authorization": "Bearer wimz_r_nope"])
        #expect(bearerUnknown.status == 401)

        let shortLived = try f.issue(device: "dev1", role: .app, expiresIn: 1)
        _ = f.relay.waitForLog(containing: "\"event\":\"credentials") // snapshot already loaded
        usleep(1_500_000)
        let expired = try refused(f, "/ws/app?device_id=dev1&token=\(shortLived.secret)")
        #expect(expired.status == 401)

        let revoked = try f.issue(device: "dev1", role: .app)
        #expect(try Subprocess.cli(["token", "revoke", String(revoked.id)], databaseURL: f.database.url).status == 0)
        var status = 0
        for _ in 0..<50 {
            status = (try? refused(f, "/ws/app?device_id=dev1&token=\(revoked.secret)"))?.status ?? 101
            if status == 401 { break }
            usleep(50_000)
        }
        #expect(status == 401)
        #expect(try f.waitForAudit { $0.event == "auth_failed" && $0.details.contains("unknown_token") })
    }

    @Test func tokensOfAnotherDeviceOrRoleOrADisabledDeviceGet403() throws {
        let f = try RelayFixture(devices: ["dev1", "dev2"])
        let otherDevice = try refused(f, "/ws/app?device_id=dev1&token=\(f.appTokens["dev2"]!)")
        #expect(otherDevice.status == 403)
        #expect(try otherDevice.json()["error"] as? String == "wrong_device")
        #expect(otherDevice.headers["wimz-error"] == "wrong_device")
        let otherRole = try refused(f, "/ws/robot?device_id=dev1&token=\(f.appTokens["dev1"]!)")
        #expect(otherRole.status == 403)
        #expect(try otherRole.json()["error"] as? String == "wrong_role")
        #expect(try Subprocess.cli(["device", "disable", "dev2"], databaseURL: f.database.url).status == 0)
        var status = 0
        for _ in 0..<50 {
            status = (try? refused(f, "/ws/robot?device_id=dev2&token=\(f.robotTokens["dev2"]!)"))?.status ?? 101
            if status == 403 { break }
            usleep(50_000)
        }
        #expect(status == 403)
    }

    @Test func bothTokenFormsWorkAndNewTokensAreAcceptedWithoutRestart() throws {
        let f = try RelayFixture()
        _ = try f.robot(useHeader: true)
        _ = try WebSocketTestClient(port: f.port, path: "/ws/app?device_id=dev1",
                                    headers: ["Authorization": "Bearer \(f.appTokens["dev1"]!)"])
        _ = try WebSocketTestClient.connect(port: f.port, role: "app", device: "dev1", token: f.appTokens["dev1"]!)
        let fresh = try f.issue(device: "dev1", role: .app)
        var connected = false
        for _ in 0..<50 where !connected {
            connected = (try? WebSocketTestClient.connect(port: f.port, role: "app", device: "dev1", token: fresh.secret)) != nil
            if !connected { usleep(50_000) }
        }
        #expect(connected)
        #expect(try f.waitForAudit { $0.event == "app_connected" })
    }

    @Test func appCapGives429() throws {
        let f = try RelayFixture(environment: ["WIMZ_MAX_APPS_PER_DEVICE": "2"])
        let a = try f.app()
        let b = try f.app()
        let third = try refused(f, "/ws/app?device_id=dev1&token=\(f.appTokens["dev1"]!)")
        #expect(third.status == 429)
        a.close()
        _ = a.waitForClose()
        usleep(200_000)
        _ = try f.app()
        _ = b
    }

    @Test func repeatedAuthFailuresFromOneAddressGet429() throws {
        let f = try RelayFixture()
        var statuses: [Int] = []
        for i in 0..<25 { statuses.append(try refused(f, "/ws/app?device_id=dev1&token=wimz_a_guess\(i)").status) }
        #expect(statuses.prefix(20).allSatisfy { $0 == 401 })
        #expect(statuses.last == 429)
        // Only failing attempts are slowed: a valid token from that address still connects
        // (one bad client behind a carrier NAT must not lock out every phone there)…
        let app = try WebSocketTestClient.connect(port: f.relay.port, role: "app", device: "dev1", token: f.appTokens["dev1"]!)
        #expect(try app.receiveJSON().eventName == "device_status")
        app.close()
        // …while the next failure is still refused.
        #expect(try refused(f, "/ws/app?device_id=dev1&token=wimz_a_guess_again").status == 429)
    }

    @Test func adminTokenFailuresCountTowardTheAddressLimit() throws {
        let admin = "admin-" + String(repeating: "0123456789abcdef", count: 2)
        let f = try RelayFixture(environment: ["WIMZ_ADMIN_TOKEN": admin])
        var statuses: [Int] = []
        for i in 0..<22 {
            statuses.append(try HTTPTestClient.get(port: f.port, path: "/admin/devices",
                                                   headers: ["Authorization": "Bearer wrong-\(i)"]).status)
        }
        #expect(statuses.prefix(20).allSatisfy { $0 == 401 } && statuses.suffix(2).allSatisfy { $0 == 429 }, "\(statuses)")
        #expect(try HTTPTestClient.get(port: f.port, path: "/admin/devices", headers: ["Authorization": "Bearer \(admin)"]).status == 200)
    }

    @Test func storeUnavailableAndNothingCachedGives503() throws {
        let relay = try RelayDaemon(databaseURL: "host=/nonexistent-wimz port=5432 user=x dbname=x")
        do {
            _ = try WebSocketTestClient.connect(port: relay.port, role: "app", device: "dev1", token: "wimz_a_x")
            Issue.record("upgrade accepted without a store")
        } catch let refused as WebSocketTestClient.UpgradeRefused {
            #expect(refused.response.status == 503)
            #expect(try refused.response.json()["error"] as? String == "store_unavailable")
        }
        relay.stop()
    }

    @Test func upgradesBeforeTheTokenMirrorLoadsWaitForItInsteadOf503() throws {
        // A reconnect storm right after a restart must authenticate, not bounce off a cold mirror.
        let cluster = try PrivateCluster()
        #expect(try Subprocess.cli(["migrate"], databaseURL: cluster.url).status == 0)
        #expect(try Subprocess.cli(["device", "add", "dev1"], databaseURL: cluster.url).status == 0)
        let token = try Subprocess.cli(["token", "issue", "--device", "dev1", "--role", "app"], databaseURL: cluster.url).lastLine
        try cluster.stop()
        // The setting by its old name, as an env file from an earlier release says it (still read).
        let relay = try RelayDaemon(databaseURL: cluster.url, environment: ["WIMZ_UPGRADE_HOLD": "20"])
        defer { relay.stop() }
        let outcome = LockedLines()
        let done = DispatchSemaphore(value: 0)
        Thread.detachNewThread {
            do {
                let app = try WebSocketTestClient.connect(port: relay.port, role: "app", device: "dev1", token: token, timeout: 25)
                outcome.withLock { $0.append("101 \((try? app.receiveJSON()["event"] as? String) ?? "-")") }
            } catch {
                outcome.withLock { $0.append("\(error)") }
            }
            done.signal()
        }
        usleep(500_000)
        // Plain HTTP is not held: the relay answers while the upgrade waits.
        #expect(try HTTPTestClient.get(port: relay.port, path: "/healthz").status == 200)
        try cluster.start()
        #expect(done.wait(timeout: .now() + 25) == .success)
        #expect(outcome.withLock { $0 } == ["101 device_status"])
    }
}

@Suite struct PresenceAndProxyTests {
    @Test func deviceStatusEndpointReportsPresenceToTokensOfThatDevice() throws {
        let f = try RelayFixture(devices: ["dev1", "dev2"])
        func status(_ device: String, _ token: String?) throws -> HTTPTestResponse {
            try HTTPTestClient.get(port: f.port, path: "/api/devices/\(device)/status",
                                   headers: token.map { ["Authorization": "Bearer \($0)"] } ?? [:])
        }
        let offline = try status("dev1", f.appTokens["dev1"])
        #expect(offline.status == 200)
        #expect(try offline.json()["online"] as? Bool == false)
        let robot = try f.robot()
        _ = try robot.receiveJSON()
        let online = try status("dev1", f.robotTokens["dev1"]).json()
        #expect(online["online"] as? Bool == true && online["apps"] as? Int == 0 && online["device_id"] as? String == "dev1")
        #expect(try status("dev1", f.appTokens["dev2"]).status == 403)
        #expect(try status("dev1", nil).status == 401)
        #expect(try status("bad%20id", f.appTokens["dev1"]).status == 400)
    }

    @Test func forwardedForIsBelievedOnlyFromTrustedProxies() throws {
        let trusting = try RelayFixture(environment: ["WIMZ_TRUSTED_PROXIES": "127.0.0.1"])
        _ = try? WebSocketTestClient(port: trusting.port, path: "/ws/app?device_id=dev1&token=wimz_a_bad",
                                     headers: ["X-Forwarded-For": "198.51.100.7, 203.0.113.9"])
        #expect(try trusting.waitForAudit { $0.event == "auth_failed" })
        let addr = try trusting.database.connect().execute("SELECT remote_addr FROM audit_log WHERE event = 'auth_failed'").first?[0]
        #expect(addr == "203.0.113.9")

        let plain = try RelayFixture()
        _ = try? WebSocketTestClient(port: plain.port, path: "/ws/app?device_id=dev1&token=wimz_a_bad",
                                     headers: ["X-Forwarded-For": "198.51.100.7"])
        #expect(try plain.waitForAudit { $0.event == "auth_failed" })
        let direct = try plain.database.connect().execute("SELECT remote_addr FROM audit_log WHERE event = 'auth_failed'").first?[0]
        #expect(direct == "127.0.0.1")
    }
}
