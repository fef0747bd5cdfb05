import Foundation
import Testing
import RelayCore
import RelayStore
import RelayTestSupport

/// One setting, one meaning: a relay started with its own TURN realm and pairing-code lifetime,
/// and the admin API, the CLI (same environment) and the robot's endpoints all use them.
@Suite struct SettingsAgreementTests {
    let adminToken = "admin-token-for-tests-0123456789"

    @Test func theRealmAndThePairingLifetimeAreTheSameEverywhere() throws {
        let realm = "acme-turn", lifetime = 900
        let settings = ["WIMZ_TURN_REALM": realm, "WIMZ_PAIRING_CODE_TTL": String(lifetime), "WIMZ_TURN_URLS": turnURLs,
                        "WIMZ_ADMIN_TOKEN": adminToken]
        let f = try RelayFixture(environment: settings)
        func call(_ method: String, _ path: String, token: String, body: String = "") throws -> (Int, [String: Any]) {
            let r = try HTTPTestClient.request(port: f.port, method: method, path: path,
                                               headers: ["Authorization": "Bearer \(token)"], body: Array(body.utf8))
            return (r.status, try r.json())
        }
        func cli(_ arguments: [String]) throws -> Subprocess.Result {
            try Subprocess.cli(arguments, databaseURL: f.database.url, environment: settings)
        }

        // TURN secrets: the admin API rotates and lists the relay's realm, and so does the CLI.
        let (rotatedStatus, rotated) = try call("POST", "/admin/turn-secrets/rotate", token: adminToken)
        #expect(rotatedStatus == 201 && rotated["realm"] as? String == realm)
        let (_, listed) = try call("GET", "/admin/turn-secrets", token: adminToken)
        let secrets = listed["secrets"] as? [[String: Any]] ?? []
        #expect(secrets.count == 1 && secrets.first?["id"] as? Int == rotated["id"] as? Int)
        let cliList = try cli(["turn-secret", "list"])
        #expect(cliList.status == 0 && cliList.stdout.contains(realm) && cliList.stdout.contains("\(rotated["id"] as? Int ?? -1)"))
        #expect(try cli(["turn-secret", "rotate"]).status == 0)
        let (_, relisted) = try call("GET", "/admin/turn-secrets", token: adminToken)
        #expect((relisted["secrets"] as? [[String: Any]])?.count == 2)
        // The robot's credential is signed by the newest secret of that realm (once NOTIFY told the relay).
        let newest = try TurnRepository(try f.database.connect()).secrets(realm: realm)[0].value
        var signedByNewest = false
        for _ in 0..<50 where !signedByNewest {
            let (status, body) = try call("GET", "/api/turn/credentials", token: f.robotTokens["dev1"]!)
            let username = body["username"] as? String ?? ""
            signedByNewest = status == 200 && body["credential"] as? String == TurnExpectation.credential(secret: newest, username: username)
            if !signedByNewest { usleep(100_000) }
        }
        #expect(signedByNewest)

        // Pairing codes live as long as the relay says, whoever mints them.
        let (robotStatus, robotCode) = try call("POST", "/api/devices/dev1/pairing-codes", token: f.robotTokens["dev1"]!)
        #expect(robotStatus == 201 && robotCode["expires_in"] as? Int == lifetime)
        let (adminStatus, adminCode) = try call("POST", "/admin/devices/dev1/pairing-codes", token: adminToken)
        #expect(adminStatus == 201 && adminCode["expires_in"] as? Int == lifetime)
        let (askedStatus, asked) = try call("POST", "/admin/devices/dev1/pairing-codes", token: adminToken, body: #"{"expires_in":60}"#)
        #expect(askedStatus == 201 && asked["expires_in"] as? Int == 60)
        #expect(try call("POST", "/admin/devices/dev1/pairing-codes", token: adminToken, body: #"{"expires_in":5}"#).0 == 400)
        let minted = try cli(["pairing-code", "--device", "dev1"])
        #expect(minted.status == 0)
        let until = minted.stdout.split(whereSeparator: \.isWhitespace).compactMap { UnixTime(iso8601: String($0)) }.first
        let expected = UnixTime.now().seconds + Int64(lifetime)
        #expect(until.map { abs($0.seconds - expected) <= 5 } == true, "\(minted.stdout)")
    }
}
