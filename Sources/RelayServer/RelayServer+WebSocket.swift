import CLibWebSockets
import Logging
import RelayLogging
import RelayCore
import RelayStore

/// An upgrade that passed every check: who it is.
struct UpgradeGrant {
    var role: Role
    var device: DeviceID
    var entry: CredentialEntry
    var remoteAddress: String
    /// An app's `recover=1`/`since=E:N` (PROTOCOL.md v1.1 "Missed events").
    var recovery: RecoveryRequest?
}

extension RelayServer {
    // MARK: - Upgrade (before the 101)

    /// Checks an upgrade request (PROTOCOL.md "WebSocket endpoints"): path, device id, token,
    /// credential rules, per-address failure limit, app cap. Returns the grant or the response.
    func authorizeUpgrade(_ request: HTTPRequest) -> Result<UpgradeGrant, UpgradeRejection> {
        let address = clientAddress(request)
        let role: Role
        switch request.head.path {
        case "/ws/robot": role = .robot
        case "/ws/app": role = .app
        default:
            return .failure(UpgradeRejection(response: .error(404, "not_found", "no such WebSocket endpoint"),
                                             failure: nil, device: nil, address: address))
        }
        let deviceText: String?
        let token: String?
        let recovery: RecoveryRequest?
        do throws(RequestError) {
            deviceText = try request.head.argument("device_id")
            token = try presentedToken(request)
            recovery = role == .app ? try RecoveryRequest.parse(recover: request.head.argument("recover"),
                                                                 since: request.head.argument("since")) : nil
        } catch {
            return .failure(UpgradeRejection(response: .error(error.status, error.code, error.message),
                                             failure: .badRequest, device: nil, address: address))
        }
        guard let deviceText, let device = DeviceID(deviceText) else {
            return .failure(UpgradeRejection(
                response: .error(400, "bad_request", "device_id is missing or not [A-Za-z0-9_.-]{1,64}"),
                failure: .badRequest, device: nil, address: address))
        }
        func reject(_ failure: AuthFailure, _ message: String) -> Result<UpgradeGrant, UpgradeRejection> {
            .failure(UpgradeRejection(response: .authFailure(failure, message: message), failure: failure,
                                      device: device, address: address))
        }
        let now = MonotonicClock.nanoseconds()
        guard authFailures.allows(address, now: now) else {
            return reject(.rateLimited, "too many failed authentications from this address; retry later")
        }
        guard let token else {
            return reject(.missingToken, "a token is required (Authorization: Bearer or token= query argument)")
        }
        guard let entry = credentials.lookup(token: token) else {
            return credentials.isLoaded ? reject(.unknownToken, "unknown token")
                : reject(.storeUnavailable, "credential store unavailable; retry shortly")
        }
        switch CredentialRules.authorize(entry, device: device, role: role, at: .now()) {
        case .failure(let failure):
            let messages: [AuthFailure: String] = [
                .expiredToken: "token expired", .revokedToken: "token revoked",
                .wrongDevice: "token belongs to another device", .wrongRole: "token is for another role",
                .deviceDisabled: "device disabled",
            ]
            return reject(failure, messages[failure] ?? failure.rawValue)
        case .success:
            break
        }
        if role == .app, !hub.hasRoomForApp(device) {
            return .failure(UpgradeRejection(
                response: .error(429, "too_many_connections",
                                 "this device already has \(configuration.maxAppsPerDevice) app connections",
                                 headers: [("Retry-After", "1")]),
                failure: nil, device: device, address: address))
        }
        return .success(UpgradeGrant(role: role, device: device, entry: entry, remoteAddress: address, recovery: recovery))
    }

    /// `Authorization: Bearer …` first, then the `token=` query argument (which may appear once).
    private func presentedToken(_ request: HTTPRequest) throws(RequestError) -> String? {
        let fromQuery = try request.head.argument("token")
        if let token = bearerToken(request) { return token }
        if let fromQuery, !fromQuery.isEmpty { return fromQuery }
        return nil
    }

    /// The client's address: the peer, or — only when the peer is a trusted proxy — the
    /// right-most `X-Forwarded-For` entry that is not itself a trusted proxy.
    func clientAddress(_ request: HTTPRequest) -> String {
        let peer = request.peerAddress
        guard configuration.trustedProxies.contains(peer),
              let forwarded = request.head.header("x-forwarded-for"), forwarded.utf8.count <= 1024 else { return peer }
        let hops = forwarded.split(separator: ",").map { String($0.filter { $0 != " " }) }
        for hop in hops.reversed() where !hop.isEmpty && !configuration.trustedProxies.contains(hop) {
            // Only something that looks like an address: it ends up in logs and the audit log.
            guard hop.count <= 45, hop.allSatisfy({ $0.isHexDigit || $0 == "." || $0 == ":" }) else { return peer }
            return hop
        }
        return peer
    }

    /// Handles `LWS_CALLBACK_HTTP_CONFIRM_UPGRADE`: 0 to proceed, 1 when a rejection was sent,
    /// -1 to drop the connection.
    func confirmUpgrade(_ wsi: OpaquePointer) -> Int32 {
        let started = MonotonicClock.nanoseconds()
        defer { gate?.forget(wsi) }
        let request: HTTPRequest
        switch requestHead(wsi) {
        case .success(let head):
            request = HTTPRequest(wsi: wsi, head: head)
        case .failure(let error):
            return HTTPRequest(wsi: wsi, head: HTTPRequestHead(method: "GET", path: "-"))
                .send(.error(error.status, error.code, error.message), asHTTP11: true) ? 1 : -1
        }
        if stopping {
            let response = HTTPResponse.error(503, "shutting_down", "the relay is shutting down", headers: [("Retry-After", "1")])
            logRequest(request, status: 503, startedAt: started)
            return request.send(response, asHTTP11: true) ? 1 : -1
        }
        switch authorizeUpgrade(request) {
        case .success(let grant):
            pendingGrant = (wsi, grant)
            return 0
        case .failure(let rejection):
            if let failure = rejection.failure { recordAuthFailure(failure, rejection: rejection) }
            logRequest(request, status: rejection.response.status, startedAt: started)
            return request.send(rejection.response, asHTTP11: true) ? 1 : -1
        }
    }

    private func recordAuthFailure(_ failure: AuthFailure, rejection: UpgradeRejection) {
        let now = MonotonicClock.nanoseconds()
        if failure != .storeUnavailable, failure != .rateLimited { authFailures.recordFailure(rejection.address, now: now) }
        counters.authFailures[failure, default: 0] += 1
        audit(.authFailed, device: rejection.device?.rawValue, tokenID: nil, address: rejection.address,
              details: [("reason", .string(failure.rawValue))])
    }

    // MARK: - Established socket

    /// Handles `LWS_CALLBACK_ESTABLISHED`: creates the session and attaches it.
    func established(_ wsi: OpaquePointer, user: UnsafeMutableRawPointer?) -> Int32 {
        guard let user else { return -1 }
        let grant: UpgradeGrant
        if let pending = pendingGrant, pending.wsi == wsi {
            grant = pending.grant
        } else if case .success(let head) = requestHead(wsi), case .success(let g) = authorizeUpgrade(HTTPRequest(wsi: wsi, head: head)) {
            grant = g
        } else {
            return -1
        }
        pendingGrant = nil
        let now = MonotonicClock.nanoseconds()
        if let accepted = acceptedAt.removeValue(forKey: wsi) {
            counters.handshakeSeconds.observe(Double(now - accepted) / 1e9)
        }
        nextSessionID += 1
        let session = Session(id: nextSessionID, role: grant.role, deviceID: grant.device, tokenID: grant.entry.token.id,
                              tokenExpiresAt: grant.entry.token.expiresAt, remoteAddress: grant.remoteAddress,
                              connectedAt: .now(), now: now,
                              queue: SendQueue(maxMessages: configuration.sendQueueMaxMessages,
                                               maxBytes: configuration.sendQueueMaxBytes))
        session.recovery = grant.recovery
        let connection = Connection(wsi: wsi, session: session, closeWatch: closeWatch)
        session.transport = connection
        connection.store(in: user)
        openConnections += 1
        hub.attach(session, now: now)
        if grant.role == .robot { pushTurnCredentials(to: session) }
        session.nextPingAt = keepalive.firstPing(now: now, fraction: Double.random(in: 0...1))
        scheduleChecks(session, now: now, wall: .now())
        auditWriter.touch(tokenID: grant.entry.token.id, at: .now())
        audit(grant.role == .robot ? .robotConnected : .appConnected, device: grant.device.rawValue,
              tokenID: grant.entry.token.id, address: grant.remoteAddress,
              details: [("connection", .int(Int64(session.id)))])
        log.info("ws_connected", metadata: ["role": "\(grant.role.rawValue)", "device": "\(grant.device.rawValue)", "connection": .stringConvertible(session.id), "remote": "\(grant.remoteAddress)"])
        return 0
    }

    /// Handles `LWS_CALLBACK_RECEIVE`: reassembles and routes whole messages.
    func receive(_ connection: Connection, _ input: UnsafeMutableRawPointer?, _ length: Int) -> Int32 {
        let wsi = connection.wsi
        let session = connection.session
        session.lastHeard = MonotonicClock.nanoseconds()
        let first = lws_is_first_fragment(wsi) != 0
        let complete = lws_is_final_fragment(wsi) != 0 && lws_remaining_packet_payload(wsi) == 0
        // The common case, a whole message in one callback: one copy, straight into the payload.
        if first, complete, length <= configuration.maxMessageBytes {
            let bytes = input.map { Array(UnsafeRawBufferPointer(start: $0, count: length)) } ?? []
            hub.receive(Payload(bytes, isBinary: lws_frame_is_binary(wsi) != 0), from: session, now: session.lastHeard)
            return 0
        }
        if first {
            connection.receiving.removeAll(keepingCapacity: connection.receiving.capacity <= 65536)
            connection.receivingBinary = lws_frame_is_binary(wsi) != 0
            connection.rejected = false
        }
        if connection.rejected { return 0 }
        let total = connection.receiving.count + length + Int(lws_remaining_packet_payload(wsi))
        if total > configuration.maxMessageBytes {
            connection.rejected = true
            connection.receiving = []
            counters.closes[CloseCode.tooLarge.rawValue, default: 0] += 1
            session.close(.tooLarge, reason: "message too large")
            hub.detach(session)
            return 0
        }
        if connection.receiving.isEmpty { connection.receiving.reserveCapacity(total) }
        if let input, length > 0 {
            connection.receiving.append(contentsOf: UnsafeRawBufferPointer(start: input, count: length))
        }
        guard complete else { return 0 }
        let payload = Payload(connection.receiving, isBinary: connection.receivingBinary)
        connection.receiving = []
        hub.receive(payload, from: session, now: session.lastHeard)
        return 0
    }

    /// Handles `LWS_CALLBACK_SERVER_WRITEABLE`: sends a pending close, else drains the queue.
    func writeable(_ connection: Connection) -> Int32 {
        let session = connection.session
        if let closing = session.closing {
            var reason = Array(closing.reason.utf8.prefix(120))
            lws_close_reason(connection.wsi, lws_close_status(UInt32(closing.code.rawValue)), &reason, reason.count)
            return -1
        }
        guard writer.drain(connection) else { return -1 }
        if !session.queue.isEmpty || session.pingDue { connection.requestWrite() }
        return 0
    }

    /// Handles `LWS_CALLBACK_CLOSED`: detaches, audits, frees.
    func closed(_ user: UnsafeMutableRawPointer?) {
        guard let connection = Connection.from(user: user) else { return }
        let session = connection.session
        hub.detach(session)
        if session.role == .robot { robotExchanges.robotGone(session.id).forEach(finishRobotRequest) }
        connection.isFinished = true
        openConnections -= 1
        if let code = session.closing?.code { counters.closes[code.rawValue, default: 0] += 1 }
        let seconds = Double(UnixTime.now().microseconds - session.connectedAt.microseconds) / 1e6
        var details: [(String, JSONValue)] = [
            ("connection", .int(Int64(session.id))), ("duration_s", .double((seconds * 1000).rounded() / 1000)),
            ("messages_in", .int(Int64(session.messagesIn))), ("bytes_in", .int(Int64(session.bytesIn))),
            ("messages_out", .int(Int64(session.messagesOut))), ("bytes_out", .int(Int64(session.bytesOut))),
        ]
        if let closing = session.closing {
            details.append(("close_code", .int(Int64(closing.code.rawValue))))
            details.append(("close_reason", .string(closing.reason)))
        }
        audit(session.role == .robot ? .robotDisconnected : .appDisconnected, device: session.deviceID.rawValue,
              tokenID: session.tokenID, address: session.remoteAddress, details: details)
        log.info("ws_disconnected", metadata: Logger.Metadata(fields: details)
            .merging(["role": "\(session.role.rawValue)", "device": "\(session.deviceID.rawValue)"]) { $1 })
        Connection.release(user: user)
        if stopping && openConnections == 0 { finishStop() }
    }

    // MARK: - Periodic work

    /// Puts `session` back on the wheel for its next ping or silence deadline, its token's
    /// expiry, or (robots) the push before its TURN credential's refresh time.
    func scheduleChecks(_ session: Session, now: UInt64, wall: UnixTime) {
        var next = keepalive.nextCheck(session)
        func at(_ time: UnixTime) -> UInt64 {
            let seconds = time.seconds - wall.seconds
            return seconds <= 0 ? now : now + UInt64(seconds) * 1_000_000_000
        }
        if let expires = session.tokenExpiresAt { next = min(next, at(expires)) }
        if session.role == .robot, turn.isAvailable, let refresh = session.turnRefreshAt {
            next = min(next, at(refresh.adding(seconds: -turnPushLead)))
        }
        scheduler.schedule(session, at: next)
    }

    /// Every 10 ms: closes let out and cut off, overdue requests, the stop's deadline, then the
    /// sessions the wheel says are due (pings, silence, token expiry, TURN pushes — O(due), see
    /// `SessionScheduler`), a few at a time, so keepalive never comes as a burst.
    func tickWheel() {
        let now = MonotonicClock.nanoseconds()
        closeWatch.tick(now: now)
        gate?.expire(now: now)
        if robotExchanges.count > 0 { robotExchanges.expire(now: now).forEach(finishRobotRequest) }
        hub.expireParked(now: now)
        if stopping, let deadline = stopDeadline, now >= deadline { finishStop() }
        let wall = UnixTime.now()
        for session in scheduler.due(now: now) {
            guard let connection = session.transport as? Connection else { continue }
            if let expires = session.tokenExpiresAt, expires <= wall {
                session.close(.revoked, reason: "token expired")
                hub.detach(session)
                continue
            }
            switch keepalive.check(session, now: now) {
            case .timeout:
                // Silent for two intervals: the peer or its NAT is gone; drop without a close handshake.
                counters.keepaliveTimeouts += 1
                log.info("keepalive_timeout", metadata: ["connection": .stringConvertible(session.id), "silent_ms": .stringConvertible((now - session.lastHeard) / 1_000_000)])
                hub.detach(session)
                lws_set_timeout(connection.wsi, PENDING_TIMEOUT_USER_OK, LWS_TO_KILL_ASYNC)
                continue
            case .ping:
                session.pingDue = true
                log.debug("ping", metadata: ["connection": .stringConvertible(session.id)])
                connection.requestWrite()
            case .nothing:
                break
            }
            if session.role == .robot, session.closing == nil, turnPushDue(session, wall: wall) { pushTurnCredentials(to: session) }
            scheduleChecks(session, now: now, wall: wall)
        }
    }

    /// Once a second: housekeeping that is not per session.
    func tick() {
        let now = MonotonicClock.nanoseconds()
        turn.sweepLimiters()
        robotHTTPLimiter.sweep()
        pairingLimiter.sweep()
        cluster.report(sockets: openConnections, devices: hub.deviceCount)
        // Upgrades held for the token mirror past the hold: answered now (503 if still cold).
        if let gate, gate.holdUpgrades?() == false { gate.releaseHeldUpgrades() }
        onTick?(now)
        authFailures.sweep(now: now)
    }
}

/// A refused upgrade: the response to send and what to record.
struct UpgradeRejection: Error {
    var response: HTTPResponse
    var failure: AuthFailure?
    var device: DeviceID?
    var address: String
}
