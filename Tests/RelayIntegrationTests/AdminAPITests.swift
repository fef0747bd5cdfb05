import Foundation
import Testing
import RelayTestSupport

/// The admin API over a real socket, every response checked against docs/openapi.json.
@Suite struct AdminAPITests {
    let adminToken = "admin-token-for-tests-0123456789"

    @Test func everyEndpointConformsToTheOpenAPIDocument() throws {
        let spec = try OpenAPIChecker(path: TestEnvironment.repositoryRoot.appendingPathComponent("docs/openapi.json").path)
        let f = try RelayFixture(environment: ["WIMZ_ADMIN_TOKEN": adminToken])
        func call(_ method: String, _ path: String, _ template: String, body: String? = nil, token: String? = nil,
                  expect status: Int) throws -> [String: Any] {
            let r = try HTTPTestClient.request(port: f.port, method: method, path: path,
                                               headers: ["Authorization": "Bearer \(token ?? adminToken)"],
                                               body: body.map { Array($0.utf8) } ?? [])
            #expect(r.status == status, "\(method) \(path): \(r.status) \(r.text)")
            let json = try r.json()
            let problems = spec.problems(json, path: template, method: method, status: r.status)
            #expect(problems.isEmpty, "\(method) \(path): \(problems)")
            return json
        }
        #expect(try call("GET", "/admin/devices", "/admin/devices", expect: 200)["devices"] as? [Any] != nil)
        _ = try call("POST", "/admin/devices", "/admin/devices", body: #"{"id":"robot-9","name":"Nine"}"#, expect: 201)
        _ = try call("POST", "/admin/devices", "/admin/devices", body: #"{"id":"robot-9"}"#, expect: 409)
        _ = try call("POST", "/admin/devices", "/admin/devices", body: #"{"id":"bad id"}"#, expect: 400)
        _ = try call("POST", "/admin/devices", "/admin/devices", body: "not json", expect: 400)
        _ = try call("GET", "/admin/devices/robot-9", "/admin/devices/{id}", expect: 200)
        _ = try call("GET", "/admin/devices/ghost", "/admin/devices/{id}", expect: 404)
        #expect(try call("GET", "/admin/devices/robot-9/presence", "/admin/devices/{id}/presence", expect: 200)["online"] as? Bool == false)
        let issued = try call("POST", "/admin/devices/robot-9/tokens", "/admin/devices/{id}/tokens",
                              body: #"{"role":"app","label":"phone","expires_in":3600}"#, expect: 201)
        let secret = try #require(issued["secret"] as? String)
        let tokenID = try #require((issued["token"] as? [String: Any])?["id"] as? Int)
        _ = try call("POST", "/admin/devices/robot-9/tokens", "/admin/devices/{id}/tokens", body: #"{"role":"boss"}"#, expect: 400)
        let tokens = try call("GET", "/admin/tokens?device_id=robot-9", "/admin/tokens", expect: 200)
        #expect((tokens["tokens"] as? [Any])?.count == 1)
        #expect(!String(describing: tokens).contains(secret))

        // Revocation through the admin API closes the token's live socket within a second.
        // The new token reaches the relay's token mirror through NOTIFY: allow it a moment under load.
        var connected: WebSocketTestClient?
        for _ in 0..<50 where connected == nil {
            connected = try? WebSocketTestClient.connect(port: f.port, role: "app", device: "robot-9", token: secret)
            if connected == nil { usleep(100_000) }
        }
        let app = try #require(connected)
        _ = try app.receiveJSON()
        let revoked = try call("POST", "/admin/tokens/\(tokenID)/revoke", "/admin/tokens/{id}/revoke", expect: 200)
        let at = Date()
        #expect(revoked["status"] as? String == "revoked")
        #expect(app.waitForClose(timeout: 3) == 4003)
        #expect(Date().timeIntervalSince(at) < 1)
        _ = try call("POST", "/admin/tokens/424242/revoke", "/admin/tokens/{id}/revoke", expect: 404)

        _ = try call("POST", "/admin/devices/robot-9/disable", "/admin/devices/{id}/disable", expect: 200)
        #expect(try call("POST", "/admin/devices/robot-9/enable", "/admin/devices/{id}/enable", expect: 200)["disabled"] as? Bool == false)
        let rotated = try call("POST", "/admin/turn-secrets/rotate", "/admin/turn-secrets/rotate", expect: 201)
        #expect(rotated["signing"] as? Bool == true)
        _ = try call("GET", "/admin/turn-secrets", "/admin/turn-secrets", expect: 200)

        // Audit log, by device and time, paged.
        let page1 = try call("GET", "/admin/audit?device_id=robot-9&limit=2", "/admin/audit", expect: 200)
        let entries1 = try #require(page1["entries"] as? [[String: Any]])
        #expect(entries1.map { $0["event"] as? String } == ["device_created", "token_issued"])
        let after = try #require(page1["next_after"] as? Int)
        let page2 = try call("GET", "/admin/audit?device_id=robot-9&after=\(after)&limit=100", "/admin/audit", expect: 200)
        let events2 = (page2["entries"] as? [[String: Any]] ?? []).compactMap { $0["event"] as? String }
        #expect(events2.contains("token_revoked") && events2.contains("device_disabled") && events2.contains("device_enabled"))
        #expect(page2["next_after"] is NSNull)
        let future = try call("GET", "/admin/audit?from=2999-01-01T00:00:00Z", "/admin/audit", expect: 200)
        #expect((future["entries"] as? [Any])?.isEmpty == true)
        _ = try call("GET", "/admin/audit?from=yesterday", "/admin/audit", expect: 400)
        let actors = Set(try f.auditEvents().filter { $0.device == "robot-9" }.map(\.event))
        #expect(actors.contains("device_created"))

        _ = try call("GET", "/admin/devices", "/admin/devices", token: "wrong", expect: 401)
    }

    @Test func disabledWithoutAnAdminToken() throws {
        let f = try RelayFixture()
        let r = try HTTPTestClient.get(port: f.port, path: "/admin/devices", headers: ["Authorization": "Bearer x"])
        #expect(r.status == 404)
    }
}

@Suite struct OpenAPICheckerTests {
    @Test func reportsNonConformingBodies() throws {
        let spec = try OpenAPIChecker(path: TestEnvironment.repositoryRoot.appendingPathComponent("docs/openapi.json").path)
        let good: [String: Any] = ["id": "d", "name": "", "created_at": "2026-11-22T00:00:00Z", "disabled": false, "disabled_at": NSNull()]
        #expect(spec.problems(good, path: "/admin/devices/{id}", method: "GET", status: 200).isEmpty)
        var missing = good
        missing["disabled"] = nil
        #expect(!spec.problems(missing, path: "/admin/devices/{id}", method: "GET", status: 200).isEmpty)
        var wrongType = good
        wrongType["disabled"] = "no"
        #expect(!spec.problems(wrongType, path: "/admin/devices/{id}", method: "GET", status: 200).isEmpty)
        var notNullable = good
        notNullable["name"] = NSNull()
        #expect(!spec.problems(notNullable, path: "/admin/devices/{id}", method: "GET", status: 200).isEmpty)
        #expect(!spec.problems(good, path: "/admin/devices/{id}", method: "GET", status: 418).isEmpty)
    }
}
