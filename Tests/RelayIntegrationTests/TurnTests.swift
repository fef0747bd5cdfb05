import Foundation
import Testing
import RelayCore
import RelayStore
import RelayTestSupport

let turnURLs = "turns:turn.example.com:5349?transport=tcp,turn:turn.example.com:3478?transport=udp,turn:turn.example.com:3478?transport=tcp"

/// `GET /api/turn/credentials`, the `turn_credentials` push, and interop with a real coturn.
@Suite struct TurnTests {
    func get(_ f: RelayFixture, token: String?, query: String = "") throws -> HTTPTestResponse {
        try HTTPTestClient.get(port: f.port, path: "/api/turn/credentials\(query)",
                               headers: token.map { ["Authorization": "Bearer \($0)"] } ?? [:])
    }

    @Test func endpointFormatClampingAndRecording() throws {
        let secret = "static-secret-for-tests-0123456789"
        let f = try RelayFixture(environment: ["WIMZ_TURN_URLS": turnURLs, "WIMZ_TURN_SECRET": secret])
        let before = UnixTime.now().seconds
        let r = try get(f, token: f.appTokens["dev1"]!)
        #expect(r.status == 200)
        let body = try r.json()
        let username = try #require(body["username"] as? String)
        let parts = username.split(separator: ":")
        // An app's user id names the member (docs/protocol.md v1.3): <device_id>/<token_id>.
        let appTokenID = try f.database.connect().execute("SELECT id FROM tokens WHERE device_id = 'dev1' AND role = 'app'").rows[0][0]!
        #expect(parts.count == 2 && parts[1] == "dev1/\(appTokenID)")
        let expiry = Int64(parts[0])!
        #expect(expiry >= before + 86400 && expiry <= UnixTime.now().seconds + 86400)
        #expect(body["credential"] as? String == TurnExpectation.credential(secret: secret, username: username))
        #expect(body["ttl"] as? Int == 86400)
        #expect((body["urls"] as? [String])?.first == "turn:turn.example.com:3478?transport=udp")
        #expect(body["expires_at"] as? String == UnixTime(seconds: expiry).iso8601)
        #expect(body["refresh_at"] as? String == UnixTime(seconds: expiry - 43200).iso8601)
        let ice = try #require(body["ice_servers"] as? [[String: Any]])
        #expect(ice.count == 2 && (ice[0]["urls"] as? [String]) == ["stun:turn.example.com:3478"])
        #expect(ice[1]["username"] as? String == username)

        #expect(try get(f, token: f.robotTokens["dev1"]!, query: "?ttl=10").json()["ttl"] as? Int == 300)
        #expect(try get(f, token: f.robotTokens["dev1"]!, query: "?ttl=999999").json()["ttl"] as? Int == 172_800)
        #expect(try get(f, token: f.robotTokens["dev1"]!, query: "?ttl=600").json()["ttl"] as? Int == 600)

        #expect(try f.waitForAudit { $0.event == "turn_credential_issued" && $0.details.contains("dev1/") })
        var issuances = 0
        for _ in 0..<50 {
            issuances = Int(try f.database.connect().execute("SELECT count(*) FROM turn_issuances WHERE via = 'http'").first![0]!)!
            if issuances >= 4 { break }
            usleep(100_000)
        }
        #expect(issuances == 4)
        #expect(!f.relay.log.joined().contains(secret))
    }

    @Test func endpointErrors() throws {
        let f = try RelayFixture(devices: ["dev1", "dev2"],
                                 environment: ["WIMZ_TURN_URLS": turnURLs, "WIMZ_TURN_SECRET": "static-secret-for-tests-0123456789"])
        let missing = try get(f, token: nil)
        #expect(missing.status == 401)
        #expect(missing.headers["www-authenticate"]?.hasPrefix("Bearer") == true)
        #expect(try missing.json()["error"] as? String == "missing_token")
        #expect(try get(f, token: "wimz_a_nope").status == 401)
        #expect(try Subprocess.cli(["device", "disable", "dev2"], databaseURL: f.database.url).status == 0)
        var status = 0
        for _ in 0..<50 {
            status = try get(f, token: f.appTokens["dev2"]!).status
            if status == 403 { break }
            usleep(50_000)
        }
        #expect(status == 403)
        var statuses: [Int] = []
        for _ in 0..<12 { statuses.append(try get(f, token: f.appTokens["dev1"]!).status) }
        #expect(statuses.prefix(10).allSatisfy { $0 == 200 } && statuses.last == 429)
        #expect(try HTTPTestClient.request(port: f.port, method: "POST", path: "/api/turn/credentials").status == 405)

        let unconfigured = try RelayFixture()
        let none = try HTTPTestClient.get(port: unconfigured.port, path: "/api/turn/credentials",
                                          headers: ["Authorization": "Bearer \(unconfigured.appTokens["dev1"]!)"])
        #expect(none.status == 503)
        #expect(try none.json()["error"] as? String == "turn_unavailable")
    }

    @Test func robotConnectedLongerThanATTLGetsFreshCredentialsThatAllocate() throws {
        // TTL 12 s: refresh_at 6 s after issue; pushes come ~1 s before that, so about every 5 s.
        let secret = "static-secret-for-tests-0123456789"
        let coturn = try TurnServer(staticSecret: secret)
        let f = try RelayFixture(environment: ["WIMZ_TURN_URLS": "turn:127.0.0.1:\(coturn.port)?transport=udp",
                                               "WIMZ_TURN_SECRET": secret, "WIMZ_TURN_TTL": "12", "WIMZ_TURN_TTL_MIN": "2"])
        let robot = try f.robot()
        // A reader thread timestamps each push on arrival; allocation (slow) runs here meanwhile.
        let received = PushLog()
        robot.socket.setTimeout(14)
        let reader = Thread {
            let start = Date()
            while Date().timeIntervalSince(start) < 13, let m = try? robot.receiveJSON() {
                if m.eventName == "turn_credentials", let data = m.dataObject { received.append(Date(), data) }
            }
            received.finish()
        }
        reader.start()
        var pushes: [(at: Date, refresh: UnixTime, username: String)] = []
        var allocated = 0
        while !received.isFinished || received.count > pushes.count {
            guard let (at, data) = received.item(pushes.count) else { usleep(20_000); continue }
            let refresh = try #require(UnixTime(iso8601: data["refresh_at"] as! String))
            pushes.append((at, refresh, data["username"] as! String))
            if try coturn.allocates(username: data["username"] as! String, credential: data["credential"] as! String) {
                allocated += 1
            }
        }
        #expect(allocated == pushes.count)
        #expect(pushes.count >= 3)  // on connect, then every ~5 s
        for (a, b) in zip(pushes, pushes.dropFirst()) {
            // Each fresh credential arrived before the previous one's refresh_at.
            #expect(UnixTime(microseconds: Int64(b.at.timeIntervalSince1970 * 1e6)) <= a.refresh.adding(seconds: 1))
            #expect(a.username != b.username || a.refresh != b.refresh)
        }
    }

    /// coturn does not exit when its port is taken: it retries the bind for ever. The test
    /// coturn must then move on to another port rather than be used without a listener.
    @Test func aTestCoturnWhosePortIsTakenMovesToAnother() throws {
        let taken = socket(AF_INET, Int32(SOCK_DGRAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        defer { close(taken) }
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        var port = 0
        for candidate in (20000...32000).shuffled().prefix(20) {
            address.sin_port = in_port_t(UInt16(candidate).bigEndian)
            let bound = withUnsafePointer(to: &address) {
                $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(taken, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
            }
            if bound == 0 { port = candidate; break }
        }
        try #require(port != 0)
        let secret = "static-secret-for-tests-0123456789"
        let coturn = try TurnServer(staticSecret: secret, ports: [port])
        #expect(coturn.port != port)
        let username = "\(UnixTime.now().seconds + 600):dev1.robot"
        #expect(try coturn.allocates(username: username, credential: TurnExpectation.credential(secret: secret, username: username)))
    }

    @Test func credentialsAllocateAtCoturnAndTamperedOrExpiredOnesDoNot() throws {
        let secret = "static-secret-for-tests-0123456789"
        let coturn = try TurnServer(staticSecret: secret)
        let f = try RelayFixture(environment: ["WIMZ_TURN_URLS": "turn:127.0.0.1:\(coturn.port)?transport=udp",
                                               "WIMZ_TURN_SECRET": secret, "WIMZ_TURN_TTL_MIN": "1"])
        let good = try get(f, token: f.robotTokens["dev1"]!).json()
        let username = good["username"] as! String
        let credential = good["credential"] as! String
        #expect(try coturn.allocates(username: username, credential: credential))
        // Tampered: another user id with the same MAC, or a changed MAC.
        #expect(try !coturn.allocates(username: username.replacingOccurrences(of: "dev1", with: "dev2"), credential: credential))
        #expect(try !coturn.allocates(username: username, credential: String(credential.reversed())))
        // Expired: a 1 s credential from the endpoint, used 2.5 s later.
        let short = try get(f, token: f.robotTokens["dev1"]!, query: "?ttl=1").json()
        usleep(2_500_000)
        #expect(try !coturn.allocates(username: short["username"] as! String, credential: short["credential"] as! String))
    }

    @Test func rotationThroughTheSharedDatabaseIsPickedUpLiveByCoturn() throws {
        let f = try RelayFixture(environment: ["WIMZ_TURN_URLS": "turn:127.0.0.1:1?transport=udp", "WIMZ_TURN_REALM": "wimz"])
        let url = f.database.url
        #expect(try Subprocess.cli(["turn-secret", "add"], databaseURL: url).status == 0)
        let coturn = try TurnServer(realm: "wimz", psqlUserDB: url)
        // The relay hears of the secret through NOTIFY.
        var first: [String: Any] = [:]
        for _ in 0..<50 {
            let r = try get(f, token: f.robotTokens["dev1"]!)
            if r.status == 200 { first = try r.json(); break }
            usleep(100_000)
        }
        let firstUser = try #require(first["username"] as? String)
        let firstCredential = first["credential"] as! String
        #expect(try coturn.allocates(username: firstUser, credential: firstCredential))

        #expect(try Subprocess.cli(["turn-secret", "rotate"], databaseURL: url).status == 0)
        let newest = try TurnRepository(try f.database.connect()).secrets(realm: "wimz")[0].value
        func signedByNewest(_ body: [String: Any]) -> Bool {
            body["credential"] as? String == TurnExpectation.credential(secret: newest, username: body["username"] as? String ?? "")
        }
        var second: [String: Any] = [:]
        for _ in 0..<50 {
            second = try get(f, token: f.appTokens["dev1"]!).json()
            if signedByNewest(second) { break }
            usleep(100_000)
        }
        #expect(signedByNewest(second))
        // Signed by the new secret, accepted by the running coturn without a restart…
        #expect(try coturn.allocates(username: second["username"] as! String, credential: second["credential"] as! String))
        // …and the credential signed by the previous secret still allocates.
        #expect(try coturn.allocates(username: firstUser, credential: firstCredential))

        // Retiring the old secret is refused while its credentials live, then forced: coturn drops it.
        let list = try Subprocess.cli(["turn-secret", "list"], databaseURL: url)
        let oldID = try #require(list.stdout.split(separator: "\n").last?.split(separator: " ").first.map(String.init))
        #expect(!list.stdout.contains(try TurnRepository(try f.database.connect()).secrets(realm: "wimz")[0].value))
        let refused = try Subprocess.cli(["turn-secret", "retire", oldID], databaseURL: url)
        #expect(refused.status != 0 && refused.stderr.contains("--force"))
        #expect(try Subprocess.cli(["turn-secret", "retire", oldID, "--force"], databaseURL: url).status == 0)
        #expect(try !coturn.allocates(username: firstUser, credential: firstCredential))
        let kinds = try f.auditEvents().map(\.event)
        #expect(kinds.contains("turn_secret_added") && kinds.contains("turn_secret_rotated") && kinds.contains("turn_secret_retired"))
    }
}

/// Pushes seen by a reader thread.
final class PushLog: @unchecked Sendable {
    private let lock = NSLock()
    private var items: [(Date, [String: Any])] = []
    private var done = false
    func append(_ at: Date, _ data: [String: Any]) { lock.lock(); items.append((at, data)); lock.unlock() }
    func finish() { lock.lock(); done = true; lock.unlock() }
    var isFinished: Bool { lock.lock(); defer { lock.unlock() }; return done }
    var count: Int { lock.lock(); defer { lock.unlock() }; return items.count }
    func item(_ i: Int) -> (Date, [String: Any])? { lock.lock(); defer { lock.unlock() }; return i < items.count ? items[i] : nil }
}

@Suite struct MetricsTests {
    /// Scrapes /metrics, parses every sample line, and checks that counters move.
    @Test func countersMoveAndTheExpositionParses() throws {
        let f = try RelayFixture(environment: ["WIMZ_TURN_URLS": turnURLs, "WIMZ_TURN_SECRET": "static-secret-for-tests-0123456789"])
        func scrape() throws -> [String: Double] {
            let r = try HTTPTestClient.get(port: f.port, path: "/metrics")
            #expect(r.status == 200 && r.headers["content-type"]?.hasPrefix("text/plain") == true)
            var samples: [String: Double] = [:]
            for line in r.text.split(separator: "\n") where !line.hasPrefix("#") {
                let parts = line.split(separator: " ")
                #expect(parts.count == 2, "bad sample line: \(line)")
                samples[String(parts[0])] = Double(parts[1])
            }
            return samples
        }
        let before = try scrape()
        #expect(before["wimz_database_up"] == 1)
        #expect(before["wimz_turn_credentials_issued_total"] == 0)
        let robot = try f.robot()
        _ = try robot.receive(until: { $0.eventName == "turn_credentials" })
        _ = try? WebSocketTestClient.connect(port: f.port, role: "app", device: "dev1", token: "wimz_a_bad")
        let after = try scrape()
        #expect(after["wimz_sockets{role=\"robot\"}"] == 1)
        #expect(after["wimz_devices_online"] == 1)
        #expect(after["wimz_turn_refresh_pushes_total"] == 1)
        #expect(after["wimz_turn_credentials_issued_total"] == 1)
        #expect(after["wimz_auth_failures_total{reason=\"unknown_token\"}"] == 1)
        #expect(after["wimz_turn_robots_past_expiry"] == 0)
        #expect(after["wimz_handshake_seconds_count"] == 1)
        #expect(after["wimz_handshake_seconds_bucket{le=\"+Inf\"}"] == 1)
        let app = try f.app()
        _ = try app.receiveJSON()
        try robot.send(#"{"type":"event","event":"x","data":{}}"#)
        _ = try app.receive(until: { $0.eventName == "x" })
        let moved = try scrape()
        #expect(moved["wimz_messages_forwarded_total{direction=\"robot_to_apps\"}"] == 1)
        #expect(moved["wimz_bytes_forwarded_total{direction=\"robot_to_apps\"}"] == 38)
    }
}
