import Foundation
@testable import RelayCore
import RelayStore
import Testing
@testable import RelayServer

/// The router, authentication and handlers in this process (no socket, no database): what the
/// daemon answers before any I/O happens.
@Suite struct RouterTests {
    @Test func unknownPathsWrongMethodsAndPlainRequestsToWebSocketPaths() {
        let relay = InProcessRelay()
        #expect(relay.request("GET", "/nope")?.status == 404)
        let wrongMethod = relay.request("DELETE", "/api/turn/credentials")
        #expect(wrongMethod?.status == 405)
        #expect(wrongMethod?.header("Allow") == "GET")
        #expect(relay.request("GET", "/ws/app?device_id=d1")?.json["error"] as? String == "upgrade_required")
    }

    /// The relay's audit events carry the relay's clock (a manual one here), not the machine's.
    @Test func auditEventsAreStampedWithTheInjectedClock() throws {
        let relay = InProcessRelay()
        relay.clock.advance(seconds: 3_600)
        let event = try #require(relay.components.env.audit.event(.appConnected, device: "d", tokenID: 1, address: nil, details: .object([])))
        #expect(event.at == relay.clock.wall && event.kind == .appConnected)
        #expect(relay.components.env.audit.writer.unmadeCount == 0)
    }

    @Test func readinessFollowsTheStoreAndTheDrain() {
        let relay = InProcessRelay()
        #expect(relay.request("GET", "/healthz")?.status == 200)
        let cold = relay.request("GET", "/readyz")
        #expect(cold?.status == 503 && cold?.json["status"] as? String == "unavailable")
        relay.storeReady()
        #expect(relay.request("GET", "/readyz")?.status == 200)
        relay.components.stop.beginDrain()
        let draining = relay.request("GET", "/readyz")
        #expect(draining?.status == 503 && draining?.json["status"] as? String == "draining")
        // A lone node closes at once: no sockets, so the loop ends.
        #expect(relay.loop.finished && !relay.loop.acceptsConnections)
    }

    @Test func bearerTokensAreCheckedAgainstWhatTheStoreSays() {
        let relay = InProcessRelay()
        let robot = relay.token("d1", .robot)
        let app = relay.token("d1", .app, expiresIn: 60)
        // A token the store could not be asked about (its wait ended) is the store's fault, not the token's.
        relay.storeAnswers = false
        #expect(relay.request("GET", "/api/devices/d1/status", token: robot.secret)?.json["error"] as? String == "store_unavailable")
        relay.storeAnswers = true
        relay.storeReady([robot.entry, app.entry])
        #expect(relay.request("GET", "/api/devices/d1/status")?.json["error"] as? String == "missing_token")
        #expect(relay.request("GET", "/api/devices/d1/status", token: "wimz_r_nope")?.status == 401)
        #expect(relay.request("GET", "/api/devices/d2/status", token: robot.secret)?.json["error"] as? String == "wrong_device")
        // Accepted: the presence is answered later, from the database worker.
        #expect(relay.request("GET", "/api/devices/d1/status", token: app.secret) == nil)
        relay.clock.advance(seconds: 61)
        #expect(relay.request("GET", "/api/devices/d1/status", token: app.secret)?.json["error"] as? String == "expired_token")
        // Revoked by a notification: refused from then on.
        relay.components.store.handle(.tokenChanged(id: robot.entry.token.id, entry: nil))
        #expect(relay.request("GET", "/api/devices/d1/status", token: robot.secret)?.json["error"] as? String == "unknown_token")
    }

    /// Every row of the table: the router refuses the wrong caller before any handler runs.
    @Test func theRouterEnforcesEachRoutesAuth() {
        let admin = "admin-token-for-tests-0123456789"
        let relay = InProcessRelay {
            $0.adminToken = admin
            $0.authFailureBurst = 1_000_000  // this test fails on purpose, many times
        }
        let robot = relay.token("d1", .robot)
        let app = relay.token("d1", .app)
        let other = relay.token("d2", .app)
        relay.storeReady([robot.entry, app.entry, other.entry])
        for route in Routes.table {
            let method = route.methods[0]
            let path = route.pattern.replacingOccurrences(of: "{device_id}", with: "d1").replacingOccurrences(of: "{path+}", with: "x")
                .replacingOccurrences(of: "{id}", with: "d1").replacingOccurrences(of: "{token_id}", with: "7")
                .replacingOccurrences(of: "{invite_id}", with: "3")
                .replacingOccurrences(of: "{token}", with: String(repeating: "ab", count: 32))
            func error(_ token: String?) -> String? { relay.request(method, path, token: token)?.json["error"] as? String }
            switch route.kind {
            case .open: continue
            case .admin:
                #expect(error(nil) == "unknown_token" && error(app.secret) == "unknown_token", "\(method) \(path)")
                #expect(error(admin) != "unknown_token", "\(method) \(path)")
            case .token(let access, _):
                #expect(error(nil) == "missing_token", "\(method) \(path)")
                #expect(error("wimz_a_unknown") == "unknown_token", "\(method) \(path)")
                if route.pattern.contains("{device_id}") {
                    #expect(error(other.secret) == "wrong_device", "\(method) \(path)")
                }
                if access != .robotOrApp {
                    #expect(error(access == .robot ? app.secret : robot.secret) == "wrong_role", "\(method) \(path)")
                }
                let own = access == .robot ? robot.secret : app.secret
                #expect(!["missing_token", "unknown_token", "wrong_device", "wrong_role"].contains(error(own) ?? ""), "\(method) \(path)")
            }
        }
        #expect(relay.request("GET", "/api/devices/d%31/status", token: app.secret)?.json["error"] as? String == "bad_request")
    }

    /// An address over its failure limit shares a few waiting places for its lookups: past them
    /// a token the relay does not hold is answered 429 before any lookup is queued; a token it
    /// holds still goes on, and so does a good one it has to read while a place is free (a good
    /// credential is never refused for the limit).
    @Test func aFailingAddressSharesAFewLookups() {
        let relay = InProcessRelay { $0.authFailureBurst = 2; $0.authFailureRate = 0.001 }
        let app = relay.token("d1", .app)
        let cold = relay.token("d1", .app)
        relay.storeReady([app.entry, cold.entry])
        #expect(relay.request("GET", "/api/turn/credentials", token: app.secret)?.status != 401)  // now held
        for n in 0..<3 { #expect(relay.request("GET", "/api/turn/credentials", token: "wimz_a_guess\(n)")?.status == (n < 2 ? 401 : 429)) }
        // A good token from the failing address is read while a place is free.
        #expect(relay.request("GET", "/api/turn/credentials", token: cold.secret)?.json["error"] as? String != "rate_limited")
        // The store takes its time: the next guesses take the places failing addresses share
        // (the gate would hold them; this harness answers 503 at once)…
        relay.storeAnswers = false
        let lookups = relay.components.authenticator.lookups
        for n in 0..<lookups.failingShare {
            #expect(relay.request("GET", "/api/turn/credentials", token: "wimz_a_waiting\(n)")?.status == 503)
        }
        let asked = lookups.asked
        // …so the one after it is answered at once, nothing queued.
        let limited = relay.request("GET", "/api/turn/credentials", token: "wimz_a_guess9")
        #expect(limited?.status == 429 && limited?.header("Retry-After") == "1")
        #expect(lookups.asked == asked && lookups.refusedFailingAddress == 1)
        relay.storeAnswers = true
        #expect(relay.request("GET", "/api/turn/credentials", token: app.secret)?.json["error"] as? String != "rate_limited")
        // Another address is not slowed.
        #expect(relay.request("GET", "/api/turn/credentials", token: "wimz_a_guess10", peer: "198.51.100.8")?.status == 401)
    }

    /// A request is routed and its caller checked once, from the head; served after its body
    /// arrived, its token is checked again from the cache, so one revoked meanwhile is refused.
    @Test func aTokenRevokedWhileTheBodyArrivedIsRefused() throws {
        let relay = InProcessRelay()
        let app = relay.token("d1", .app)
        relay.storeReady([app.entry])
        let text = "PUT /api/devices/d1/push HTTP/1.1\r\nAuthorization: Bearer \(app.secret)\r\nContent-Length: 2\r\n\r\n"
        guard case .complete(let parsed, _) = HTTPRequestHead.parse(Array(text.utf8)) else {
            Issue.record("unparsed")
            return
        }
        let (head, refusal) = relay.present(parsed, peer: "198.51.100.7")
        #expect(refusal == nil && head.credential?.token == app.secret)
        let request = HTTPRequest(client: HTTPClient(relay.newHandle()), head: head, peerAddress: "198.51.100.7")
        guard case .admitted(let routed) = relay.components.router.admit(request, contentLength: 2) else {
            Issue.record("not admitted")
            return
        }
        var revoked = app.entry.token
        revoked.revokedAt = relay.clock.wall
        relay.components.store.handle(.tokenChanged(id: revoked.id, entry: CredentialEntry(token: revoked, deviceDisabled: false)))
        let answer = relay.components.router.serve(request, routed, recheck: true, body: Array("{}".utf8))
        #expect(answer?.status == 401, "\(answer?.json ?? [:])")
    }

    @Test func theAdminAPIHidesItselfWithoutItsToken() {
        #expect(InProcessRelay().request("GET", "/admin/devices")?.status == 404)
        let relay = InProcessRelay { $0.adminToken = "admin-secret" }
        #expect(relay.request("GET", "/admin/devices", token: "wrong")?.status == 401)
        #expect(relay.request("GET", "/admin/nothing-here", token: "admin-secret")?.status == 404)
        // Where the admin API is, nobody else learns which paths or methods exist.
        #expect(relay.request("GET", "/admin/nothing-here", token: "wrong")?.status == 401)
        #expect(relay.request("DELETE", "/admin/devices", token: "wrong")?.status == 401)
        #expect(relay.request("DELETE", "/admin/devices", token: "admin-secret")?.status == 405)
        #expect(relay.request("GET", "/nothing-here", token: "wrong")?.status == 404)
        #expect(relay.request("GET", "/admin/devices", token: "admin-secret") == nil)  // to the database worker
    }

    @Test func turnCredentialsAreMintedRateLimitedAndRefilledOnTheClock() throws {
        let relay = InProcessRelay {
            $0.turnURLs = ["turn:turn.example:3478"]
            $0.turnStaticSecret = "s3cret"
            $0.turnRequestBurst = 2
            $0.turnRequestRate = 1
        }
        let app = relay.token("d1", .app)
        relay.storeReady([app.entry])
        let first = try #require(relay.request("GET", "/api/turn/credentials?ttl=600", token: app.secret))
        #expect(first.status == 200)
        let username = try #require(first.json["username"] as? String)
        // coturn's REST format: expiry (issue time + ttl) first, then the user id.
        #expect(username.hasPrefix("\(relay.clock.wall.seconds + 600):"))
        #expect(relay.request("GET", "/api/turn/credentials", token: app.secret)?.status == 200)
        #expect(relay.request("GET", "/api/turn/credentials", token: app.secret)?.json["error"] as? String == "rate_limited")
        relay.clock.advance(seconds: 1.5)
        #expect(relay.request("GET", "/api/turn/credentials", token: app.secret)?.status == 200)
    }

    @Test func httpToTheRobotNeedsTheAppTokenAndAConnectedRobot() {
        let relay = InProcessRelay()
        let robot = relay.token("d1", .robot)
        let app = relay.token("d1", .app)
        relay.storeReady([robot.entry, app.entry])
        let wrongRole = relay.request("GET", "/api/devices/d1/robot/mode", token: robot.secret)
        #expect(wrongRole?.status == 403 && wrongRole?.json["error"] as? String == "wrong_role")
        let offline = relay.request("GET", "/api/devices/d1/robot/mode", token: app.secret)
        #expect(offline?.status == 503 && offline?.header("Retry-After") == "1")
        #expect(offline?.json["error"] as? String == "device_offline")
    }

    /// The wheel's deadlines follow the relay's clock: a robot that never answers gets its app a
    /// 504 once the manual clock passes the timeout, not a moment before.
    @Test func theWheelsDeadlinesFollowTheRelaysClock() throws {
        let relay = InProcessRelay { $0.robotHTTPTimeoutSeconds = 2 }
        let robotToken = relay.token("d1", .robot)
        let app = relay.token("d1", .app)
        relay.storeReady([robotToken.entry, app.entry])
        let robot = Session(id: 1, role: .robot, deviceID: DeviceID("d1")!, tokenID: robotToken.entry.token.id, tokenExpiresAt: nil,
                            remoteAddress: "127.0.0.1", connectedAt: relay.clock.wall, now: relay.clock.monotonic,
                            queue: SendQueue(maxMessages: 100, maxBytes: 1 << 20))
        final class Silent: SessionTransport {}
        let transport = Silent()
        robot.transport = transport
        relay.components.hub.attach(robot, now: relay.clock.monotonic, wallClock: relay.clock.wall)
        defer { relay.components.hub.detach(robot) }
        #expect(relay.request("GET", "/api/devices/d1/robot/mode", token: app.secret) == nil)  // on its way to the robot
        relay.clock.advance(seconds: 1.9)
        relay.components.tickWheel(now: relay.clock.monotonic)
        #expect(relay.deferred.isEmpty)
        relay.clock.advance(seconds: 0.2)
        relay.components.tickWheel(now: relay.clock.monotonic)
        let answer = try #require(relay.deferred.first?.response)
        #expect(answer.status == 504 && answer.json["error"] as? String == "robot_timeout")
    }
}

@Suite struct MetricsEndpointTests {
    /// Every sample line of a scrape, by name and labels.
    private func scrape(_ relay: InProcessRelay) throws -> [String: Double] {
        let response = try #require(relay.request("GET", "/metrics"))
        #expect(response.status == 200 && response.contentType == "text/plain; version=0.0.4")
        var samples: [String: Double] = [:]
        for line in String(decoding: response.body, as: UTF8.self).split(separator: "\n") where !line.hasPrefix("#") {
            let parts = line.split(separator: " ")
            samples[String(parts[0])] = Double(parts[1])
        }
        return samples
    }

    @Test func countersKeptAsPlainFieldsAreCopiedIntoTheRegistryOnceEach() throws {
        let relay = InProcessRelay()
        relay.storeReady()
        relay.components.env.counters.requestsRefused = 2
        relay.components.hub.forwarded.robotToApps.bytes = 38
        let first = try scrape(relay)
        #expect(first["wimz_http_requests_refused_total"] == 2)
        #expect(first["wimz_bytes_forwarded_total{direction=\"robot_to_apps\"}"] == 38)
        #expect(first["wimz_database_up"] == 1)
        #expect(first["wimz_history_bytes"] == 0 && first["wimz_history_budget_bytes"] == Double(512 << 20))
        #expect(first["wimz_history_evictions_total"] == 0)
        #expect(first["wimz_build_info{version=\"\(RelayBuild.version)\",event_loop=\"libev\"}"] == 1)
        // A second scrape adds only what moved since the first.
        relay.components.env.counters.requestsRefused = 3
        let second = try scrape(relay)
        #expect(second["wimz_http_requests_refused_total"] == 3)
        #expect(second["wimz_bytes_forwarded_total{direction=\"robot_to_apps\"}"] == 38)
        relay.components.env.metrics.handshakeSeconds.record(0.002)
        #expect(try scrape(relay)["wimz_handshake_seconds_count"] == 1)
    }
}
