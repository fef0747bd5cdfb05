import RelayCore
import RelayStore

/// TURN credentials (docs/protocol.md "TURN credentials"): `GET /api/turn/credentials` for robots and
/// apps, and the `turn_credentials` events pushed to robots on connect and before `refresh_at`.
/// Owns the `TurnService` (secrets, signer, per-token limit). Service thread only.
final class TurnEndpoint {
    let service: TurnService
    private let env: RelayEnvironment
    private let hub: DeviceHub
    private let authenticator: Authenticator

    init(env: RelayEnvironment, hub: DeviceHub, authenticator: Authenticator) {
        self.env = env
        self.hub = hub
        self.authenticator = authenticator
        service = TurnService(configuration: env.configuration)
    }

    /// `GET /api/turn/credentials` for `entry`'s token (the router checked it), `?ttl=` clamped;
    /// 429/503 with JSON bodies.
    func credentials(_ request: HTTPRequest, entry: CredentialEntry) -> HTTPResponse {
        guard service.allowRequest(tokenID: entry.token.id, now: env.clock.monotonic()) else {
            return .error(.authentication(.rateLimited, "too many credential requests for this token"))
        }
        let requestedTTL: String?
        do throws(RelayError) { requestedTTL = try request.head.argument("ttl") } catch {
            return .error(error)
        }
        let now = env.clock.wall()
        // An app's credential never outlives its token (a guest's `until`).
        guard let ttl = service.policy.ttl(service.policy.clampTTL(requestedTTL),
                                           endingBy: entry.token.role == .app ? entry.token.expiresAt : nil, issuedAt: now) else {
            return .error(.authentication(.expiredToken, "token expired"))
        }
        guard let minted = service.issue(device: entry.token.deviceID, role: entry.token.role, tokenID: entry.token.id, ttl: ttl,
                                         clientAddress: authenticator.clientAddress(request), via: "http", now: now)
        else {
            return .error(.turnUnavailable, "no TURN secret or URL is configured", headers: [("Retry-After", "5")])
        }
        record(minted.issuance)
        // A robot that fetched its own credential: the next push is due at this one's refresh time.
        if entry.token.role == .robot, let robot = hub.robot(of: entry.token.deviceID), robot.tokenID == entry.token.id {
            robot.turnRefreshAt = minted.times.refreshAt
            robot.turnExpiresAt = minted.times.expiresAt
        }
        return .json(200, minted.body)
    }

    /// Sends a robot a fresh credential as a `turn_credentials` event.
    func push(to robot: Session) {
        guard let minted = service.issue(device: robot.deviceID, role: .robot, tokenID: robot.tokenID,
                                         ttl: service.policy.clampTTL(nil), clientAddress: robot.remoteAddress, via: "push",
                                         now: env.clock.wall())
        else { return }
        robot.turnRefreshAt = minted.times.refreshAt
        robot.turnExpiresAt = minted.times.expiresAt
        service.pushed += 1
        record(minted.issuance)
        hub.deliver(RelayMessages.turnCredentials(body: minted.body.encoded), to: robot)
    }

    /// Seconds before `refresh_at` a robot gets its next credential pushed, so it has it in
    /// hand at refresh time: ttl/10, at least 1 s and at most a minute.
    var pushLead: Int64 { Int64(max(1, min(60, service.policy.clampTTL(nil) / 10))) }

    /// When `robot`'s next push is due (nil: TURN is off or it has no credential yet).
    func nextPush(_ robot: Session) -> UnixTime? {
        guard service.isAvailable, let refresh = robot.turnRefreshAt else { return nil }
        return refresh.adding(seconds: -pushLead)
    }

    /// The session wheel's one call for a robot (`WebSocketEndpoint.tickSessions`): a fresh
    /// credential pushed when one is due — none yet, or `pushLead` before its refresh time.
    /// `nextPush` tells the wheel when to come back.
    func refreshIfDue(_ robot: Session, wall: UnixTime) {
        guard robot.closing == nil, service.isAvailable, nextPush(robot).map({ wall >= $0 }) ?? true else { return }
        push(to: robot)
    }

    /// The store's TURN secrets (loaded or changed). When TURN has just become available, robots
    /// connected without a credential get one now; returned, for the wheel to take up their
    /// refresh times.
    func secretsLoaded(_ secrets: [TurnSecret]) -> [Session] {
        service.update(secrets: secrets)
        guard service.isAvailable else { return [] }
        let robots = hub.allSessions.filter { $0.role == .robot && $0.closing == nil && $0.turnRefreshAt == nil }
        for robot in robots { push(to: robot) }
        return robots
    }

    /// Forgets idle per-token limiters (the 1 s tick).
    func sweep(now: UInt64) { service.sweepLimiters(now: now) }

    /// Robots holding a credential past `refresh_at` / past expiry (for /metrics; should be 0).
    func robotsWithStaleCredentials(now: UnixTime) -> (pastRefresh: Int, pastExpiry: Int) {
        guard service.isAvailable else { return (0, 0) }
        var pastRefresh = 0
        var pastExpiry = 0
        for robot in hub.allSessions where robot.role == .robot && robot.closing == nil {
            if let r = robot.turnRefreshAt, now >= r { pastRefresh += 1 }
            if let e = robot.turnExpiresAt, now >= e { pastExpiry += 1 }
        }
        return (pastRefresh, pastExpiry)
    }

    /// The row and its audit event share one id, so a replay from the spool stores each once.
    private func record(_ issuance: TurnIssuance) {
        let details: [(String, JSONValue)] = [
            ("user_id", .string(issuance.userID)), ("expires_at", .string(issuance.expiresAt.iso8601)),
            ("via", .string(issuance.via)), ("secret_id", issuance.secretID.map { .int($0) } ?? .null),
        ]
        guard let event = env.audit.event(.turnCredentialIssued, device: issuance.deviceID.rawValue, tokenID: issuance.tokenID,
                                          address: issuance.clientAddress, details: .object(details)) else { return }
        var row = issuance
        row.id = event.id.description
        env.audit.writer.record(row)
        env.audit.writer.record(event)
    }
}

extension TurnEndpoint: MetricsReporting {
    func report(to metrics: MetricsSink) {
        metrics.counter("wimz_turn_credentials_issued_total", "TURN credentials minted (HTTP and push).", service.issued)
        metrics.counter("wimz_turn_refresh_pushes_total", "turn_credentials events pushed to robots.", service.pushed)
        let stale = robotsWithStaleCredentials(now: env.clock.wall())
        metrics.gauge("wimz_turn_robots_past_refresh", "Online robots whose newest credential is past refresh_at (should be 0).",
                      stale.pastRefresh)
        metrics.gauge("wimz_turn_robots_past_expiry", "Online robots whose newest credential has expired (should be 0).",
                      stale.pastExpiry)
    }
}
