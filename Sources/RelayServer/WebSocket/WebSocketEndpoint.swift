import CLibWebSockets
import Logging
import RelayLogging
import RelayCore
import WimzProtocol

/// The WebSocket endpoints `/ws/robot` and `/ws/app` (docs/protocol.md "The two sockets"): the
/// upgrade's checks (WebSocketUpgrade.swift), the sessions from ESTABLISHED to CLOSED (receive,
/// write, close), and the session wheel that pings, times out, expires tokens and pushes TURN credentials. Owns the
/// open connections and the write buffer. Service thread only.
final class WebSocketEndpoint {
    /// Microseconds between ticks of the session wheel.
    static let wheelInterval: Int64 = 10_000
    /// The stop: whether upgrades are still taken, and the count of open connections it waits for.
    let stop: StopSequence
    /// An app socket attached (its phone is looking now: pushes counted for it go).
    private let onAppAttached: (Session) -> Void
    let env: RelayEnvironment
    /// The devices (handed in by `RelayComponents`) and the message limit: read per received message.
    let hub: DeviceHub
    private let maxMessageBytes: Int
    let authenticator: Authenticator
    private let turn: TurnEndpoint
    private let robotHTTP: RobotHTTPEndpoint
    let heads: RequestHeads
    private let keepalive: KeepalivePolicy
    private let writer: FrameWriter
    /// The hub's message buffers (see `PayloadPool`), held directly: taken per received message.
    private let payloads: PayloadPool
    /// The socket layer: lws in the daemon, a recording one in the in-process tests.
    private let io: WebSocketIO
    /// Which sessions need a look, and when: ticked every 10 ms (O(due) per tick).
    private let scheduler: SessionScheduler
    /// Closing sockets: let out a few per wheel tick, cut off if their close does not get out.
    private let closeWatch = CloseWatch()
    /// The grant decided in CONFIRM_UPGRADE, consumed by the ESTABLISHED that follows it.
    var pendingGrant: (wsi: OpaquePointer, grant: UpgradeGrant)?
    /// When each not-yet-established connection was accepted (handshake latency metric).
    var acceptedAt: [OpaquePointer: UInt64] = [:]
    private var nextSessionID: UInt64 = 0

    init(env: RelayEnvironment, hub: DeviceHub, authenticator: Authenticator, turn: TurnEndpoint, robotHTTP: RobotHTTPEndpoint,
         heads: RequestHeads, io: WebSocketIO, stop: StopSequence, onAppAttached: @escaping (Session) -> Void) {
        self.env = env
        self.stop = stop
        self.onAppAttached = onAppAttached
        self.hub = hub
        self.io = io
        maxMessageBytes = env.configuration.maxMessageBytes
        self.authenticator = authenticator
        self.turn = turn
        self.robotHTTP = robotHTTP
        self.heads = heads
        let configuration = env.configuration
        keepalive = KeepalivePolicy(interval: UInt64(configuration.pingIntervalSeconds) * 1_000_000_000)
        scheduler = SessionScheduler(now: env.clock.monotonic(), slotWidth: UInt64(Self.wheelInterval) * 1000, slotCount: 2048)
        payloads = hub.payloads
        // One write buffer holds any single frame: the largest message, or an `http_request`
        // carrying the largest robot HTTP body (base64: 4/3 of it, plus the head's headers).
        writer = FrameWriter(capacity: max(64 * 1024, configuration.maxMessageBytes + 16,
                                           (configuration.robotHTTPMaxBody + 2) / 3 * 4 + 32 * 1024), payloads: hub.payloads)
    }

    // MARK: - Established socket

    /// Handles `LWS_CALLBACK_ESTABLISHED`: opens the connection its upgrade's grant allows and
    /// hands it to the per-session data.
    func established(_ wsi: OpaquePointer, user: UnsafeMutableRawPointer?) -> Int32 {
        guard let user else { return -1 }
        let grant: UpgradeGrant
        if let pending = pendingGrant, pending.wsi == wsi {
            grant = pending.grant
        } else if case .success(let head) = heads.head(of: wsi), case .success(let g) = authorizeUpgrade(LWSHTTP.request(wsi, head: head)) {
            grant = g
        } else {
            return -1
        }
        pendingGrant = nil
        let connection = open(wsi, grant: grant)
        connection.store(in: user)
        writeFirstMessages(connection)
        return 0
    }

    /// Every session opens with a message queued (the app's device status, the robot's app
    /// count). On a plain socket it is written from here, straight after lws's 101 and (the gate
    /// corked the socket) in one segment with it — not from a WRITEABLE asked for now, which cost
    /// an `epoll_ctl` and a turn of the event loop a connection.
    /// lws writes nothing after its 101 by itself and holds none of it back here
    /// (`canWriteDirectly`), so the bytes keep their order; what the kernel does not take goes
    /// first at the WRITEABLE asked for then. TLS sockets take the usual way.
    private func writeFirstMessages(_ connection: Connection) {
        let session = connection.session
        connection.opened()
        if session.closing == nil, !session.queue.isEmpty, io.canWriteDirectly(connection.wsi) {
            writer.drainDirectly(connection)
            uncork(connection, connection.wroteDirectly())
        }
        if session.closing != nil || !connection.unsent.isEmpty || !session.queue.isEmpty || session.pingDue {
            connection.requestWrite()
        }
    }

    /// Lets the 101 out, with whatever was written after it, when the connection's state says
    /// it is still corked (`Connection.State`).
    private func uncork(_ connection: Connection, _ uncork: Connection.State.Uncork) {
        if uncork == .yes { io.uncork(connection.wsi) }
    }

    /// Creates the session of an upgrade that was granted on `wsi` and attaches it.
    private func open(_ wsi: OpaquePointer, grant: UpgradeGrant) -> Connection {
        env.thread.assertOnServiceThread()
        let now = env.clock.monotonic()
        if let accepted = acceptedAt.removeValue(forKey: wsi) {
            env.metrics.handshakeSeconds.record(Double(now - accepted) / 1e9)
        }
        nextSessionID += 1
        let session = Session(id: nextSessionID, role: grant.role, deviceID: grant.device, tokenID: grant.entry.token.id,
                              tokenExpiresAt: grant.entry.token.expiresAt, rights: grant.entry.token.rights,
                              remoteAddress: grant.remoteAddress,
                              connectedAt: env.clock.wall(), now: now,
                              queue: SendQueue(maxMessages: env.configuration.sendQueueMaxMessages,
                                               maxBytes: env.configuration.sendQueueMaxBytes))
        session.recovery = grant.recovery
        session.wantsSenders = grant.wantsSenders
        let connection = Connection(wsi: wsi, io: io, session: session, closeWatch: closeWatch)  // opening
        session.transport = connection
        stop.connectionOpened()
        hub.attach(session, now: now, wallClock: env.clock.wall())
        if grant.role == .robot { turn.push(to: session) } else { onAppAttached(session) }
        // First pings spread over the interval by the golden-ratio sequence of session ids: even
        // for sessions opened together, and no random-number syscall per connection.
        session.nextPingAt = keepalive.firstPing(now: now, fraction: (Double(session.id) * 0.618_033_988_749_895)
            .truncatingRemainder(dividingBy: 1))
        scheduleChecks(session, now: now, wall: env.clock.wall())
        env.audit.writer.touch(tokenID: grant.entry.token.id, at: env.clock.wall())
        env.audit.record(grant.role == .robot ? .robotConnected : .appConnected, device: grant.device.rawValue,
              tokenID: grant.entry.token.id, address: grant.remoteAddress,
              details: [("connection", .int(Int64(session.id)))])
        env.log.info("ws_connected", metadata: ["role": "\(grant.role.rawValue)", "device": "\(grant.device.rawValue)",
                                                "connection": .stringConvertible(session.id), "remote": "\(grant.remoteAddress)"])
        return connection
    }

    /// Handles `LWS_CALLBACK_RECEIVE`: reassembles and routes whole messages.
    func receive(_ connection: Connection, _ input: UnsafeMutableRawPointer?, _ length: Int) -> Int32 {
        let session = connection.session
        session.lastHeard = env.clock.monotonic()
        let fragment = io.fragment(connection.wsi)
        // The common case, a whole message in one callback: one copy, straight into the payload.
        if fragment.isFirst, fragment.isLast, length <= maxMessageBytes {
            deliver(payloads.payload(copying: UnsafeRawBufferPointer(start: input, count: input == nil ? 0 : length),
                                     isBinary: fragment.isBinary), from: session)
            return 0
        }
        var bytes: [UInt8] = [], isBinary = fragment.isBinary
        switch connection.incoming {
        case .skipping where !fragment.isFirst: return 0
        case .assembling(let sofar, let binary) where !fragment.isFirst: (bytes, isBinary) = (sofar, binary)
        default: break  // a new message
        }
        connection.incoming = .none  // `bytes` holds the only reference: appended in place
        let total = bytes.count + length + fragment.remaining
        if total > maxMessageBytes {
            connection.incoming = .skipping
            hub.close(session, .tooLarge, reason: "message too large")
            return 0
        }
        if bytes.isEmpty { bytes.reserveCapacity(total) }
        if let input, length > 0 { bytes.append(contentsOf: UnsafeRawBufferPointer(start: input, count: length)) }
        if fragment.isLast {
            deliver(Payload(bytes, isBinary: isBinary), from: session)
        } else {
            connection.incoming = .assembling(bytes: bytes, isBinary: isBinary)
        }
        return 0
    }

    /// A whole received message to the hub; a text message that is not UTF-8 closes its socket
    /// instead (1007: lws does not check, see `UTF8Text`).
    private func deliver(_ payload: Payload, from session: Session) {
        guard payload.isBinary || payload.withBytes(UTF8Text.isValid) else {
            hub.close(session, .invalidPayload, reason: "text frames must be valid UTF-8")
            return
        }
        hub.receive(payload, from: session, now: session.lastHeard)
    }

    /// Handles `LWS_CALLBACK_SERVER_WRITEABLE`: sends a pending close, else drains the queue.
    func writeable(_ connection: Connection) -> Int32 {
        let session = connection.session
        switch connection.writeable() {
        case .sendClose(let cork):
            if let closing = session.closing { io.setCloseReason(connection.wsi, code: closing.code, reason: closing.reason) }
            uncork(connection, cork)
            return -1
        case .drain(let cork):
            guard writer.drain(connection) else { return -1 }
            uncork(connection, cork)
            if !session.queue.isEmpty || session.pingDue { connection.requestWrite() }
            return 0
        }
    }

    /// Handles `LWS_CALLBACK_CLOSED`: the connection's end, then the per-session data's
    /// reference goes.
    func closed(_ user: UnsafeMutableRawPointer?) {
        guard let connection = Connection.from(user: user) else { return }
        if connection.closed() { io.lingerAfterClose(connection.wsi, now: env.clock.monotonic()) }
        finish(connection)
        Connection.release(user: user)
    }

    /// A connection's end: detaches, audits, counts.
    private func finish(_ connection: Connection) {
        let session = connection.session
        hub.detach(session)
        if session.role == .robot { robotHTTP.robotGone(session) }
        session.transport = nil  // not retained: nothing may reach the connection through it from now on
        if let code = session.closing?.code { env.counters.closes[code.rawValue, default: 0] += 1 }
        let seconds = Double(env.clock.wall().microseconds - session.connectedAt.microseconds) / 1e6
        var details: [(StaticString, JSONValue)] = [
            ("connection", .int(Int64(session.id))), ("duration_s", .double((seconds * 1000).rounded() / 1000)),
            ("messages_in", .int(Int64(session.messagesIn))), ("bytes_in", .int(Int64(session.bytesIn))),
            ("messages_out", .int(Int64(session.messagesOut))), ("bytes_out", .int(Int64(session.bytesOut))),
        ]
        if let closing = session.closing {
            details.append(("close_code", .int(Int64(closing.code.rawValue))))
            details.append(("close_reason", .string(closing.reason)))
        }
        env.audit.record(session.role == .robot ? .robotDisconnected : .appDisconnected, device: session.deviceID.rawValue,
              tokenID: session.tokenID, address: session.remoteAddress, details: details)
        env.log.info("ws_disconnected", metadata: Logger.Metadata(fields: details.map { ("\($0.0)", $0.1) })
            .merging(["role": "\(session.role.rawValue)", "device": "\(session.deviceID.rawValue)"]) { $1 })
        stop.connectionClosed()
    }

    // MARK: - Periodic work

    /// Puts `session` back on the wheel for its next ping or silence deadline, its token's
    /// expiry, or (robots) the push before its TURN credential's refresh time.
    func scheduleChecks(_ session: Session, now: UInt64, wall: UnixTime) {
        var next = keepalive.nextCheck(session)
        // Exact to the microsecond: whole seconds (as before) fired up to a second late.
        func at(_ time: UnixTime) -> UInt64 {
            let micros = time.microseconds - wall.microseconds
            return micros <= 0 ? now : now + UInt64(micros) * 1000
        }
        if let expires = session.tokenExpiresAt { next = min(next, at(expires)) }
        if session.role == .robot, let push = turn.nextPush(session) { next = min(next, at(push)) }
        scheduler.schedule(session, at: next)
    }

    /// Puts `sessions` back on the wheel now (their deadlines changed outside it).
    func reschedule(_ sessions: [Session]) {
        let now = env.clock.monotonic(), wall = env.clock.wall()
        for session in sessions { scheduleChecks(session, now: now, wall: wall) }
    }

    /// Closes let out and cut off, and closed sockets that linger.
    func expireConnections(now: UInt64) {
        closeWatch.tick(now: now)
        io.tickLingering(now: now)
    }

    /// The sessions the wheel says are due (pings, silence, token expiry, TURN pushes — O(due),
    /// see `SessionScheduler`), a few at a time, so keepalive never comes as a burst.
    func tickSessions(now: UInt64, wall: UnixTime) {
        env.thread.assertOnServiceThread()
        for session in scheduler.due(now: now) {
            guard let connection = session.transport as? Connection else { continue }
            if closeIfExpired(session, wall: wall) { continue }
            switch keepalive.check(session, now: now) {
            case .timeout:
                // Silent for two intervals: the peer or its NAT is gone; drop without a close handshake.
                env.counters.keepaliveTimeouts += 1
                env.log.info("keepalive_timeout", metadata: ["connection": .stringConvertible(session.id),
                                                             "silent_ms": .stringConvertible((now - session.lastHeard) / 1_000_000)])
                hub.detach(session)
                io.drop(connection.wsi)
                continue
            case .ping:
                session.pingDue = true
                env.log.debug("ping", metadata: ["connection": .stringConvertible(session.id)])
                connection.requestWrite()
            case .nothing:
                break
            }
            if session.role == .robot { turn.refreshIfDue(session, wall: wall) }
            scheduleChecks(session, now: now, wall: wall)
        }
    }

    /// Closes `session` (4003) if its token has expired by `wall`; true if it did.
    private func closeIfExpired(_ session: Session, wall: UnixTime) -> Bool {
        guard let expires = session.tokenExpiresAt, expires <= wall, session.closing == nil else { return false }
        hub.close(session, .revoked, reason: "token expired")
        env.counters.tokenExpiryCloses += 1
        return true
    }

    /// A token's row changed (the store said so): its live sessions take the new access
    /// level (from their next frame) and expiry.
    func tokenChanged(_ entry: CredentialEntry) {
        let now = env.clock.monotonic(), wall = env.clock.wall()
        for session in hub.sessions(of: entry.token.deviceID) where session.tokenID == entry.token.id && session.closing == nil
            && (session.rights != entry.token.rights || session.tokenExpiresAt != entry.token.expiresAt) {
            session.update(rights: entry.token.rights)
            session.tokenExpiresAt = entry.token.expiresAt
            if !closeIfExpired(session, wall: wall) { scheduleChecks(session, now: now, wall: wall) }
        }
    }

    /// `LWS_CALLBACK_RECEIVE_PONG`.
    func pong(_ connection: Connection) {
        connection.session.lastHeard = env.clock.monotonic()
        env.log.debug("pong", metadata: ["connection": .stringConvertible(connection.session.id)])
    }
}
