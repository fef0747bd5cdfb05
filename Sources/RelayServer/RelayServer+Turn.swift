import CLibWebSockets
import RelayCore
import RelayStore

extension RelayServer {
    /// `GET /api/turn/credentials` (PROTOCOL.md): bearer token of an enabled device, `?ttl=`
    /// clamped; 401/403/429/503 with JSON bodies.
    func turnCredentials(_ request: HTTPRequest) -> HTTPResponse {
        let address = clientAddress(request)
        let entry: CredentialEntry
        switch authenticate(request, wants: "Authorization: Bearer <robot or app token> is required") {
        case .refused(let response): return response
        case .accepted(let found): entry = found
        }
        guard turn.allowRequest(tokenID: entry.token.id, now: MonotonicClock.nanoseconds()) else {
            return .authFailure(.rateLimited, message: "too many credential requests for this token")
        }
        let requestedTTL: String?
        do throws(RequestError) { requestedTTL = try request.head.argument("ttl") } catch {
            return .error(error.status, error.code, error.message)
        }
        let ttl = turn.policy.clampTTL(requestedTTL)
        guard let minted = turn.issue(device: entry.token.deviceID, role: entry.token.role, tokenID: entry.token.id,
                                      ttl: ttl, clientAddress: address, via: "http")
        else {
            return .error(503, "turn_unavailable", "no TURN secret or URL is configured", headers: [("Retry-After", "5")])
        }
        recordIssuance(minted.issuance)
        // A robot that fetched its own credential: the next push is due at this one's refresh time.
        if entry.token.role == .robot, let robot = hub.robot(of: entry.token.deviceID), robot.tokenID == entry.token.id {
            robot.turnRefreshAt = minted.times.refreshAt
            robot.turnExpiresAt = minted.times.expiresAt
        }
        return .json(200, minted.body)
    }

    /// Sends a robot a fresh credential as a `turn_credentials` event (on connect and before
    /// its current one reaches `refresh_at`).
    func pushTurnCredentials(to robot: Session) {
        guard let minted = turn.issue(device: robot.deviceID, role: .robot, tokenID: robot.tokenID,
                                      ttl: turn.policy.clampTTL(nil), clientAddress: robot.remoteAddress, via: "push")
        else { return }
        robot.turnRefreshAt = minted.times.refreshAt
        robot.turnExpiresAt = minted.times.expiresAt
        turn.pushed += 1
        recordIssuance(minted.issuance)
        hub.deliver(RelayMessages.turnCredentials(body: minted.body.encoded), to: robot)
    }

    /// Seconds before `refresh_at` a robot gets its next credential pushed, so it has it in
    /// hand at refresh time: ttl/10, at least 1 s and at most a minute.
    var turnPushLead: Int64 { Int64(max(1, min(60, turn.policy.clampTTL(nil) / 10))) }

    /// Whether `robot` should get a fresh credential now (none yet, or its push time came).
    func turnPushDue(_ robot: Session, wall: UnixTime) -> Bool {
        guard turn.isAvailable else { return false }
        guard let refreshAt = robot.turnRefreshAt else { return true }
        return wall >= refreshAt.adding(seconds: -turnPushLead)
    }

    /// Robots holding a credential past `refresh_at` / past expiry (for /metrics; should be 0).
    func robotsWithStaleCredentials(now: UnixTime) -> (pastRefresh: Int, pastExpiry: Int) {
        guard turn.isAvailable else { return (0, 0) }
        var pastRefresh = 0
        var pastExpiry = 0
        for robot in hub.allSessions where robot.role == .robot && robot.closing == nil {
            if let r = robot.turnRefreshAt, now >= r { pastRefresh += 1 }
            if let e = robot.turnExpiresAt, now >= e { pastExpiry += 1 }
        }
        return (pastRefresh, pastExpiry)
    }

    /// TURN became available (secrets loaded): robots connected without a credential get one.
    func pushToRobotsWithoutCredentials() {
        guard turn.isAvailable else { return }
        for robot in hub.allSessions where robot.role == .robot && robot.closing == nil && robot.turnRefreshAt == nil {
            pushTurnCredentials(to: robot)
            scheduleChecks(robot, now: MonotonicClock.nanoseconds(), wall: .now())
        }
    }

    /// The row and its audit event share one id, so a replay from the spool stores each once.
    private func recordIssuance(_ issuance: TurnIssuance) {
        let details: [(String, JSONValue)] = [
            ("user_id", .string(issuance.userID)), ("expires_at", .string(issuance.expiresAt.iso8601)),
            ("via", .string(issuance.via)), ("secret_id", issuance.secretID.map { .int($0) } ?? .null),
        ]
        guard let event = try? AuditRepository.event(.turnCredentialIssued, actor: "relay", deviceID: issuance.deviceID.rawValue,
                                                      tokenID: issuance.tokenID, remoteAddress: issuance.clientAddress,
                                                      details: .object(details))
        else { return }
        var row = issuance
        row.id = event.id
        auditWriter.record(row)
        auditWriter.record(event)
    }

    /// The bearer token of an HTTP request (`Authorization: Bearer …` only, as the contract says).
    func bearerToken(_ request: HTTPRequest) -> String? {
        request.head.header("authorization").flatMap(Redaction.bearerToken(fromAuthorization:))
    }
}
