import Foundation
import Testing
import RelayStore
import RelayTestSupport

/// Pairing an app without an operator (docs/protocol.md v1.1 "Pairing a phone"): codes minted by the robot,
/// the CLI and the admin API, redeemed once for an app token; the robot's list and revocation.
@Suite struct AppPairingTests {
    func post(_ f: RelayFixture, _ path: String, token: String? = nil, json: String = "") throws -> HTTPTestResponse {
        var headers = ["Content-Type": "application/json"]
        if let token { headers["Authorization"] = "Bearer \(token)" }
        return try HTTPTestClient.request(port: f.port, method: "POST", path: path, headers: headers, body: Array(json.utf8))
    }

    func mint(_ f: RelayFixture) throws -> String {
        let minted = try post(f, "/api/devices/dev1/pairing-codes", token: f.robotTokens["dev1"])
        #expect(minted.status == 201, "\(minted.text)")
        let body = try minted.json()
        #expect(body["expires_in"] as? Int == 600 && (body["expires_at"] as? String)?.hasSuffix("Z") == true)
        return try #require(body["code"] as? String)
    }

    @Test func aRobotsCodeBuysOneAppTokenThatConnectsAtOnce() throws {
        let f = try RelayFixture()
        let code = try mint(f)
        #expect(code.range(of: "^[2-9A-HJKMNP-Z]{5}-[2-9A-HJKMNP-Z]{5}$", options: .regularExpression) != nil, "\(code)")
        // Typed the way a person might: lower case, without the dash.
        let typed = code.lowercased().replacingOccurrences(of: "-", with: " ")
        let paired = try post(f, "/api/pairing", json: #"{"code":"\#(typed)","label":"Dana's iPhone"}"#)
        #expect(paired.status == 201, "\(paired.text)")
        let body = try paired.json()
        let token = try #require(body["token"] as? String)
        #expect(body["device_id"] as? String == "dev1" && token.hasPrefix("wimz_a_"))
        // The new token works right away on this node.
        let app = try WebSocketTestClient.connect(port: f.port, role: "app", device: "dev1", token: token)
        #expect(try app.receiveJSON().eventName == "device_status")
        // Single use: the same code again is the same 404 as a wrong one.
        for attempt in [typed, "ZZZZZ-ZZZZZ", "not a code"] {
            let again = try post(f, "/api/pairing", json: #"{"code":"\#(attempt)"}"#)
            #expect(try again.status == 404 && again.json()["error"] as? String == "invalid_code", "\(attempt)")
        }
        #expect(try f.waitForAudit { $0.event == "app_paired" && $0.details.contains("Dana's iPhone") })
        #expect(try f.waitForAudit { $0.event == "pairing_code_created" })
        #expect(try f.waitForAudit { $0.event == "pairing_failed" })
        // Only digests are stored.
        let stored = try f.database.connect().execute("SELECT encode(digest, 'hex') FROM pairing_codes").rows
        #expect(stored.count == 1 && !(stored[0][0] ?? "").contains(code.replacingOccurrences(of: "-", with: "")))
    }

    @Test func expiredCodesAreRefusedAndBruteForceGets429() throws {
        let f = try RelayFixture()
        let code = try mint(f)
        _ = try f.database.connect().execute("UPDATE pairing_codes SET expires_at = now() - interval '1 second'")
        #expect(try post(f, "/api/pairing", json: #"{"code":"\#(code)"}"#).status == 404)
        for _ in 0..<9 { #expect(try post(f, "/api/pairing", json: #"{"code":"ABCDE-FGHJK"}"#).status == 404) }
        // Ten failures in the last minute: the eleventh attempt is refused, even with a good code.
        let fresh = try mint(f)
        let refused = try post(f, "/api/pairing", json: #"{"code":"\#(fresh)"}"#)
        #expect(refused.status == 429 && refused.headers["retry-after"] == "60")
        #expect(try f.waitForAudit { $0.event == "pairing_rate_limited" })
        // Refused attempts after that are counted in memory: no transaction, no audit row each.
        for _ in 0..<20 { #expect(try post(f, "/api/pairing", json: #"{"code":"ABCDE-FGHJK"}"#).status == 429) }
        #expect(try f.auditEvents().filter { $0.event == "pairing_rate_limited" }.count == 1)
        #expect(try f.database.connect().execute("SELECT count(*) FROM pairing_failures").rows.first?[0] == "10")
        let metrics = try HTTPTestClient.get(port: f.port, path: "/metrics").text
        #expect(metrics.contains("wimz_pairing_refused_in_memory_total 20"), "\(metrics)")
        #expect(try post(f, "/api/pairing", json: "[1]").status == 400)
        #expect(try post(f, "/api/pairing", json: #"{"code":"X","label":"a\u0001b"}"#).status == 400)
    }

    @Test func onlyTheRobotMintsListsAndRevokesAndRevocationClosesTheSocket() throws {
        let f = try RelayFixture(devices: ["dev1", "dev2"])
        #expect(try post(f, "/api/devices/dev1/pairing-codes", token: f.appTokens["dev1"]).status == 403)
        #expect(try post(f, "/api/devices/dev1/pairing-codes", token: f.robotTokens["dev2"]).status == 403)
        #expect(try post(f, "/api/devices/dev1/pairing-codes").status == 401)
        let code = try mint(f)
        let token = try #require(try post(f, "/api/pairing", json: #"{"code":"\#(code)","label":"phone"}"#).json()["token"] as? String)
        let app = try WebSocketTestClient.connect(port: f.port, role: "app", device: "dev1", token: token)
        _ = try app.receiveJSON()

        let listed = try HTTPTestClient.get(port: f.port, path: "/api/devices/dev1/app-tokens",
                                            headers: ["Authorization": "Bearer \(f.robotTokens["dev1"]!)"])
        let tokens = try #require(try listed.json()["tokens"] as? [[String: Any]])
        #expect(tokens.count == 2 && tokens.allSatisfy { $0["revoked_at"] is NSNull })
        let paired = try #require(tokens.first { $0["label"] as? String == "phone" })
        let id = try #require(paired["id"] as? Int)
        #expect(try HTTPTestClient.request(port: f.port, method: "DELETE", path: "/api/devices/dev2/app-tokens/\(id)",
                                           headers: ["Authorization": "Bearer \(f.robotTokens["dev2"]!)"]).status == 404)
        let revoked = try HTTPTestClient.request(port: f.port, method: "DELETE", path: "/api/devices/dev1/app-tokens/\(id)",
                                                 headers: ["Authorization": "Bearer \(f.robotTokens["dev1"]!)"])
        #expect(try revoked.status == 200 && revoked.json()["revoked_at"] as? String != nil)
        let at = Date()
        #expect(app.waitForClose(timeout: 3) == 4003)
        #expect(Date().timeIntervalSince(at) < 1.0)
        #expect(try f.waitForAudit { $0.event == "token_revoked" })
    }

    @Test func supportStaffMintCodesFromTheCLIAndTheAdminAPI() throws {
        let admin = "wimz_admin_test_0123456789"
        let f = try RelayFixture(environment: ["WIMZ_ADMIN_TOKEN": admin])
        let cli = try Subprocess.cli(["pairing-code", "--device", "dev1"], databaseURL: f.database.url)
        #expect(cli.status == 0)
        let cliCode = try #require(cli.stdout.split(separator: "\n").last.map(String.init))
        #expect(try post(f, "/api/pairing", json: #"{"code":"\#(cliCode)"}"#).status == 201)
        let minted = try post(f, "/admin/devices/dev1/pairing-codes", token: admin, json: #"{"expires_in":60}"#)
        #expect(try minted.status == 201 && minted.json()["expires_in"] as? Int == 60)
        let adminCode = try #require(try minted.json()["code"] as? String)
        #expect(try post(f, "/api/pairing", json: #"{"code":"\#(adminCode)"}"#).status == 201)
        #expect(try post(f, "/admin/devices/nope/pairing-codes", token: admin).status == 404)
    }
}
