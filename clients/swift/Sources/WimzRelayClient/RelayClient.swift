import Foundation
import WimzProtocol
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

/// The app's connection to the WIM-Z relay for one device.
///
/// ```swift
/// let client = RelayClient(.init(url: URL(string: "https://api.wimzai.com")!, deviceID: "robot-42", token: appToken))
/// await client.start()
/// Task { for await event in client.events { … } }
/// let answer = try await client.send(command: "treat", data: ["count": 1])
/// let ice = try await client.turnCredentials().iceServers
/// ```
///
/// It keeps one socket to `/ws/app` (token in the `Authorization` header, never the URL) and
/// reconnects with capped exponential back-off and full jitter: at once after 1001/1012 (relay
/// stopping or the device moving node), longer after 429/4029/4008, never after 401/403/4003,
/// which end the client with a typed ``RelayClientError`` in ``ConnectionState/stopped(_:)``.
///
/// Commands are `{"type":"command","id":ID,"command":NAME,"data":DATA}` with ids of the
/// client's own; the robot answers `{"type":"response","id":ID,"ok":BOOL,"data":…}`
/// (docs/protocol.md, "Client conventions").
public actor RelayClient {
    public struct Configuration: Sendable {
        /// The relay: `https://api.wimzai.com` (or `http://`, `ws://`, `wss://`; a path prefix is kept).
        public var url: URL
        public var deviceID: String
        /// The app token of this device.
        public var token: String
        public var backoff = Backoff()
        /// How long ``RelayClient/send(command:data:timeout:)`` waits for the robot's response.
        public var commandTimeout: Duration = .seconds(10)
        /// `?ttl=` for TURN credentials (the relay clamps it); nil for the relay's default.
        public var turnTTL: Int?
        public var transport: any WebSocketTransport = defaultWebSocketTransport()
        /// For `GET /api/turn/credentials`.
        public var urlSession: URLSession = .shared
        /// Where a fresh token comes from: called at start and after the relay refused the
        /// current one as expired or unknown (401). A new token reconnects at once; the same one
        /// (or an error) stops the client with ``RelayClientError/unauthorized(code:message:)``.
        public var tokenProvider: (@Sendable () async throws -> String)?
        /// Ask for missed-event recovery (`recover=1`, then `since=E:N` on every reconnect), so a
        /// drop loses no event (docs/protocol.md v1.1 "Recovering missed events").
        public var recoverMissedEvents = true
        /// Quiet this long (no message, no ping from the relay) → the client pings; no pong within
        /// a quarter of it (at most 5 s) → it reconnects. The relay pings every 20 s, so the
        /// default (24 s) is never reached on a healthy link, and a dead one is noticed within
        /// 29 s (1.25× the interval in general); after a command, within 10 s of sending it
        /// (nothing heard for the pong's wait brings the ping forward).
        public var livenessInterval: Duration = .seconds(24)
        /// The clock every wait of the client follows (liveness, back-off, command timeouts,
        /// TURN refreshes): the continuous clock unless a test gives its own.
        public var clock: RelayClientClock = .continuous
        /// Resume the stream from here on the first connect (a push's place, see
        /// ``PushNotification/resumePoint(lastSeen:)``, or one the app saved).
        public var resumeFrom: ResumePoint?
        /// The sealed household (v1.5): set, the client seals and opens frames once it holds an epoch.
        public var sealed: SealedHousehold?

        public init(url: URL, deviceID: String, token: String, resumeFrom: ResumePoint? = nil) {
            self.url = url
            self.deviceID = deviceID
            self.token = token
            self.resumeFrom = resumeFrom
        }
    }

    /// Every event, in order; it ends when the client stops. Keeps the newest 1,024 unread.
    /// More listeners: ``subscribe(bufferingNewest:)``.
    public nonisolated let events: AsyncStream<RelayEvent>
    public private(set) var state: ConnectionState = .stopped(.stopped)
    /// This app's own access on the device (v1.3), as the relay last stated it: in each
    /// connection's greeting, ``refreshMember()``, or a command refused as `forbidden`.
    public internal(set) var member: MemberAccess?
    public nonisolated let configuration: Configuration

    let eventSink: Broadcaster<RelayEvent>
    /// The token in use (the configured one, or the provider's newest).
    private var token: String
    /// Missed-event recovery: the numbering the relay reported and the highest seq seen.
    private var epoch: String?
    private var lastSeq: UInt64 = 0
    /// The liveness deadline of the open connection, re-armed by every sign of life (`heard(_:)`).
    var livenessDeadline: Task<Void, Never>?
    /// When that deadline fires (the clock's time), nil while none is armed.
    var livenessDue: Duration?
    /// Counts connections: a deadline armed for one does nothing to the next.
    var connectionSerial = 0
    /// The link's round trip and the rhythm of its traffic (LinkEstimate.swift), kept across
    /// connections: the robot's rhythm is not the socket's.
    var estimate = LinkEstimate()
    /// How the client's GETs to the relay are sent again while unanswered: after the link's fitted wait.
    var requestRetry: RequestRetry { RequestRetry(wait: estimate.requestWait, clock: configuration.clock) }
    /// When the open connection last showed life (the clock's time), and how.
    var lastHeard: (sign: SignOfLife, at: Duration)?
    /// A replacement being opened beside a connection whose early probe went unanswered
    /// (Replacement.swift), and the one that opened, for the connection loop to take next.
    var replacementRace: Task<Void, Never>?
    var replacementSocket: (any WebSocketConnection)?
    /// Counts replacements begun and abandoned: a race that ends late hands over nothing.
    var replacementGeneration = 0
    /// Numbered messages up to this seq already came on the connection this one replaced (its
    /// resume point was taken while the old one still delivered): dropped, not shown twice.
    var duplicateThrough: UInt64 = 0
    /// The open connection is being ended by the client itself (``reconnectNow()``, a dead link):
    /// a fresh socket follows at once, unless the relay's close code says otherwise. Belongs to
    /// one connection: cleared when the next one opens.
    var endingOnPurpose = false
    /// ``reconnectNow()`` while no connection is open: the back-off wait ends now. Cleared when a
    /// connection opens, so it never reaches the policy for that connection's close.
    private var wakeUp = false
    /// The back-off's one timer while it waits (``reconnectNow()`` cancels it).
    private var backoffTimer: Task<Void, Never>?
    private var pathWatcher: (any Sendable)?
    /// Between ``enterBackground()`` and ``enterForeground()``: no socket, no attempt, no timer.
    private var inBackground = false
    private var foregroundWait: CheckedContinuation<Void, Never>?
    /// `ws(s)://…/ws/app?device_id=ID`: no token in it.
    nonisolated let socketURL: URL
    nonisolated let httpBase: URL
    private(set) var runner: Task<Void, Never>?
    private(set) var started = false
    /// The open socket (nil between connections).
    var connection: (any WebSocketConnection)?
    /// Commands waiting for their answers, by id (Commands.swift).
    var pending: [String: PendingCommand] = [:]
    /// Sealed API answers still arriving in parts, by id (SealedRobotHTTP.swift).
    var robotHTTPParts: [String: (answer: JSON, body: Data)] = [:]
    var commandCount = 0
    var turn: TurnCredentials?
    var turnFetch: Task<TurnCredentials, any Error>?
    var turnRefresher: Task<Void, Never>?
    /// Each new TURN credential, to ``turnCredentialUpdates()``'s streams.
    let turnSink = Broadcaster<TurnCredentials>()
    /// The sealed household (v1.5), when configured: epochs held, this connection's sealer.
    var seal: SealState?

    public init(_ configuration: Configuration) {
        self.configuration = configuration
        token = configuration.token
        epoch = configuration.resumeFrom?.epoch
        lastSeq = configuration.resumeFrom?.seq ?? 0
        eventSink = Broadcaster()
        events = eventSink.subscribe(bufferingNewest: 1024)
        var components = URLComponents(url: configuration.url, resolvingAgainstBaseURL: false) ?? URLComponents()
        let secure = ["https", "wss"].contains(components.scheme?.lowercased() ?? "")
        let basePath = components.path.hasSuffix("/") ? String(components.path.dropLast()) : components.path
        components.query = nil
        components.fragment = nil
        components.scheme = secure ? "https" : "http"
        components.path = basePath
        httpBase = components.url ?? configuration.url
        components.scheme = secure ? "wss" : "ws"
        components.path = basePath + WimzProtocol.Path.appSocket
        components.queryItems = [URLQueryItem(name: "device_id", value: configuration.deviceID)]
        socketURL = components.url ?? configuration.url
        seal = configuration.sealed.map { SealState($0, deviceID: configuration.deviceID) }
    }

    // MARK: - Lifecycle

    /// Starts connecting (and reconnecting). A client runs once: calling it again does nothing.
    public func start() {
        guard !started else { return }
        started = true
        runner = Task { await self.run() }
        pathWatcher = PlatformWatchers.start(pathChanged: { [weak self] in await self?.reconnectNow() },
                                             background: { [weak self] in await self?.enterBackground() },
                                             foreground: { [weak self] in await self?.enterForeground() })
    }

    /// The app went to the background (called by itself on iOS, inside a UIKit background task):
    /// the socket closes now (1001) instead of being suspended half-open, and nothing is tried —
    /// no attempt, no timer — until ``enterForeground()``; the relay's pushes reach the phone
    /// meanwhile. The state is ``ConnectionState/suspended``.
    public func enterBackground() async {
        guard started, runner != nil, !inBackground else { return }
        inBackground = true
        await reconnectNow()  // closes the socket, or ends the back-off's wait
    }

    /// The app is back in the foreground: connect at once (with missed-event recovery, nothing
    /// the relay still holds is lost).
    public func enterForeground() async {
        guard inBackground else { return }
        inBackground = false
        foregroundWait?.resume()
        foregroundWait = nil
    }

    /// Another stream of every event from now on (for a second view model, a logger, …); it
    /// ends when the client stops.
    public nonisolated func subscribe(bufferingNewest count: Int = 1024) -> AsyncStream<RelayEvent> {
        eventSink.subscribe(bufferingNewest: count)
    }

    /// The network path changed or the app came back to the foreground: drop the current socket
    /// (it may be dead without knowing) and connect again at once, without the back-off. Called
    /// by itself on Apple platforms (Network's path monitor, UIKit's foreground notification).
    public func reconnectNow() async {
        guard started, runner != nil else { return }
        if let connection {
            endingOnPurpose = true
            await connection.close(code: CloseCode.goingAway.rawValue)
        } else {
            wakeUp = true  // a wait ends now; a connect under way is a fresh attempt already
            backoffTimer?.cancel()
        }
    }

    /// Sends a raw text message to the robot (WebRTC offers and candidates, …).
    public func send(text: String) async throws {
        guard let connection else { throw RelayClientError.notConnected }
        try await connection.send(text: try outgoing(text))
    }

    /// Sends a raw binary message to the robot.
    public func send(binary: [UInt8]) async throws {
        guard let connection else { throw RelayClientError.notConnected }
        try await connection.send(binary: binary)
    }

    /// Closes the socket (1000), stops reconnecting and TURN refreshes, fails pending commands
    /// with ``RelayClientError/stopped`` and ends ``events``.
    public func stop() async {
        guard let runner else {
            if !started {  // never started: its TURN refreshes and streams end too
                started = true
                finish(.stopped)
            }
            return
        }
        self.runner = nil
        runner.cancel()
        seal?.departureWatch?.cancel()
        await connection?.close(code: 1000)
        await runner.value
        if case .stopped = state { return }  // already ended (401/403/4003)
        finish(.stopped)
    }

    /// The app token in use (the configured one, or the provider's newest).
    var currentToken: String { token }

    /// Where the event stream stands (the relay's numbering, the highest seq seen): saved by the
    /// app, it is ``Configuration/resumeFrom`` on its next start. Nil until the relay numbered.
    public var resumePoint: ResumePoint? { epoch.map { ResumePoint(epoch: $0, seq: lastSeq) } }

    // MARK: - The connection loop

    private func run() async {
        var backoff = configuration.backoff
        if let provider = configuration.tokenProvider {
            do { token = try await provider() } catch {
                return finish(.unauthorized(code: "token_provider_failed", message: "\(error)"))
            }
        }
        while !Task.isCancelled {
            if inBackground {
                await closeReplacement()  // no socket in the background, not even a new one
                await untilForeground()
                continue
            }
            let socket: any WebSocketConnection
            do {
                socket = try await replacementOrOpen()
            } catch let refused as WebSocketUpgradeRefused {
                let refusal = refused.relayError
                switch refusal {
                case .unauthorized(let code, _):
                    if [ErrorCode.expiredToken, .unknownToken].map(\.rawValue).contains(code), await renewToken() { continue }
                    return finish(refusal)
                case .forbidden: return finish(refusal)
                default: await pause(backoff.nextDelay(slow: refused.status == 429))
                }
                continue
            } catch {
                await pause(backoff.nextDelay())
                continue
            }
            if Task.isCancelled {
                await socket.close(code: 1000)
                break
            }
            if inBackground {  // it went while this socket opened
                await socket.close(code: CloseCode.goingAway.rawValue)
                continue
            }
            connection = socket
            seal?.newConnection()
            connectionSerial += 1
            (endingOnPurpose, wakeUp, duplicateThrough) = (false, false, 0)
            backoff.reset()
            setState(.connected)
            let opened = configuration.clock.now()
            heard(.opened)
            var closeCode: UInt16?
            var closeReason = ""
            for await event in socket.events {
                heard(.message)
                switch event {
                case .text(let text): handle(text)
                case .binary(let bytes): eventSink.yield(.binary(bytes))
                case .ping: break
                case .closed(let code, let reason): (closeCode, closeReason) = (code, reason)
                }
            }
            livenessDeadline?.cancel()
            (livenessDeadline, livenessDue, lastHeard) = (nil, nil, nil)
            abandonReplacement()
            connection = nil
            failAllPending(Task.isCancelled ? .stopped : .notConnected)
            if Task.isCancelled { break }
            // What each close code means for a reconnect is WimzProtocol's (shared with the relay),
            // decided first: a revoked token stops the client whatever else is pending.
            let policy = CloseCode.reconnect(after: closeCode)
            if endingOnPurpose, policy != .never {
                endingOnPurpose = false
                continue  // the network changed, the app came back or the socket went quiet
            }
            switch policy {
            case .never:
                await closeReplacement()
                return finish(.revoked(reason: closeReason))
            case .atOnce where configuration.clock.now() - opened >= .seconds(WimzProtocol.quickReconnectAfterSeconds):
                continue  // at once: the balancer picks a live node (one that keeps closing
                          // fresh sockets at once gets the back-off below)
            case .slowBackoff: await pause(backoff.nextDelay(slow: true))
            case .atOnce, .backoff: await pause(backoff.nextDelay())
            }
        }
        await closeReplacement()
    }

    /// The back-off's wait: one timer, cut short by ``reconnectNow()`` or ``stop()``.
    private func pause(_ delay: Duration) async {
        setState(.waiting(retryIn: delay))
        defer { wakeUp = false }
        guard !wakeUp else { return }
        let clock = configuration.clock
        let timer = Task { _ = try? await clock.sleep(delay) }
        backoffTimer = timer
        await withTaskCancellationHandler { await timer.value } onCancel: { timer.cancel() }
        backoffTimer = nil
    }

    /// Waits in the background, without a timer, for ``enterForeground()`` or ``stop()``.
    private func untilForeground() async {
        setState(.suspended)
        await withTaskCancellationHandler {
            await withCheckedContinuation { foregroundWait = $0 }
        } onCancel: {
            Task { await self.enterForeground() }
        }
    }

    /// `/ws/app?device_id=ID` plus `recover=1`, or `since=E:N` once the relay numbered messages.
    func connectURL() -> URL {
        guard configuration.recoverMissedEvents,
              var components = URLComponents(url: socketURL, resolvingAgainstBaseURL: false) else { return socketURL }
        var items = components.queryItems ?? []
        if let epoch { items.append(URLQueryItem(name: "since", value: "\(epoch):\(lastSeq)")) }
        else { items.append(URLQueryItem(name: "recover", value: "1")) }
        components.queryItems = items
        return components.url ?? socketURL
    }

    /// Asks the token provider for a new token; true when it gave one that differs.
    private func renewToken() async -> Bool {
        guard let provider = configuration.tokenProvider, let fresh = try? await provider(), fresh != token else { return false }
        token = fresh
        turn = nil
        return true
    }

    func setState(_ new: ConnectionState) {
        guard new != state else { return }
        state = new
        eventSink.yield(.connection(new))
    }

    /// Stops for good: pending commands fail, refreshes stop, the event stream ends.
    private func finish(_ reason: RelayClientError) {
        failAllPending(reason == .stopped ? .stopped : .notConnected)
        turnRefresher?.cancel()
        turnFetch?.cancel()
        setState(.stopped(reason))
        eventSink.finish()
        turnSink.finish()
    }

    private func handle(_ received: String) {
        guard let parsed = try? JSON(parsing: received) else {
            eventSink.yield(.message(raw: received))
            return
        }
        if let seq = parsed["seq"]?.intValue, seq > 0, UInt64(seq) <= duplicateThrough { return }  // came on the socket replaced
        noteNumbering(parsed)
        guard let (message, text, sealedFrame) = unsealed(parsed, received) else { return }
        let id = message["id"]?.stringValue
        switch message["type"]?.stringValue {
        case WimzProtocol.MessageType.response:
            guard let id else { return }
            resolve(id, .success(CommandResponse(id: id, ok: message["ok"]?.boolValue ?? true,
                                                 data: message["data"] ?? .null, error: message["error"], message: message)))
        case WimzProtocol.MessageType.httpResponse, WimzProtocol.MessageType.httpBody:
            if let id { receiveRobotHTTP(id, message) }
        case WimzProtocol.MessageType.error where id.map { pending[$0] != nil } ?? false:
            let refusal = RelayClientError.commandRefusal(message)
            if case .forbidden = refusal { member?.control = false }  // only a guest without control is refused
            resolve(id!, .failure(refusal))
        default:
            let event = RelayEvent(message: message, raw: text).sealed(sealedFrame)
            if case .deviceStatus(let status) = event {
                if let own = status.member { member = own }
                watchDepartures()  // an owner signs out who went while it was away
            }
            eventSink.yield(event)
        }
    }
}

extension RelayClient {
    /// Keeps what the next reconnect's `since=E:N` needs: the epoch from `device_status`, the
    /// highest `seq` seen. A new epoch, or a resume the relay could not serve, starts over at
    /// the relay's current number.
    private func noteNumbering(_ message: JSON) {
        if let seq = message["seq"]?.intValue, seq > 0 { lastSeq = max(lastSeq, UInt64(seq)) }
        guard message["event"]?.stringValue == WimzProtocol.RelayEventName.deviceStatus, let data = message["data"],
              let newEpoch = data["epoch"]?.stringValue, let seq = data["seq"]?.intValue else { return }
        if newEpoch != epoch || data["recovered"]?.boolValue == false {
            epoch = newEpoch
            lastSeq = UInt64(max(0, seq))
        } else if data["recovered"]?.boolValue == true {
            duplicateThrough = lastSeq  // what follows starts at the resume point, which may be behind
        }
    }
}
