import Foundation
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
/// (docs/protocol-notes.md, "Client conventions").
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

        public init(url: URL, deviceID: String, token: String) {
            self.url = url
            self.deviceID = deviceID
            self.token = token
        }
    }

    /// Every event, in order; it ends when the client stops. Keeps the newest 1,024 unread.
    public nonisolated let events: AsyncStream<RelayEvent>
    public private(set) var state: ConnectionState = .stopped(.stopped)
    public nonisolated let configuration: Configuration

    private let eventSink: AsyncStream<RelayEvent>.Continuation
    /// `ws(s)://…/ws/app?device_id=ID`: no token in it.
    nonisolated let socketURL: URL
    nonisolated let httpBase: URL
    private var runner: Task<Void, Never>?
    private var started = false
    private var connection: (any WebSocketConnection)?
    private var pending: [String: PendingCommand] = [:]
    private var commandCount = 0
    private var turn: TurnCredentials?
    private var turnFetch: Task<TurnCredentials, any Error>?
    private var turnRefresher: Task<Void, Never>?

    /// A command waiting for its answer; the answer may come before the caller starts waiting.
    private struct PendingCommand {
        var continuation: CheckedContinuation<CommandResponse, any Error>?
        var early: Result<CommandResponse, RelayClientError>?
        var timeout: Task<Void, Never>?
    }

    public init(_ configuration: Configuration) {
        self.configuration = configuration
        (events, eventSink) = AsyncStream.makeStream(of: RelayEvent.self, bufferingPolicy: .bufferingNewest(1024))
        var components = URLComponents(url: configuration.url, resolvingAgainstBaseURL: false) ?? URLComponents()
        let secure = ["https", "wss"].contains(components.scheme?.lowercased() ?? "")
        let basePath = components.path.hasSuffix("/") ? String(components.path.dropLast()) : components.path
        components.query = nil
        components.fragment = nil
        components.scheme = secure ? "https" : "http"
        components.path = basePath
        httpBase = components.url ?? configuration.url
        components.scheme = secure ? "wss" : "ws"
        components.path = basePath + "/ws/app"
        components.queryItems = [URLQueryItem(name: "device_id", value: configuration.deviceID)]
        socketURL = components.url ?? configuration.url
    }

    // MARK: - Lifecycle

    /// Starts connecting (and reconnecting). A client runs once: calling it again does nothing.
    public func start() {
        guard !started else { return }
        started = true
        runner = Task { await self.run() }
    }

    /// Closes the socket (1000), stops reconnecting and TURN refreshes, fails pending commands
    /// with ``RelayClientError/stopped`` and ends ``events``.
    public func stop() async {
        guard let runner else { return }
        self.runner = nil
        runner.cancel()
        await connection?.close(code: 1000)
        await runner.value
        if case .stopped = state { return }  // already ended (401/403/4003)
        finish(.stopped)
    }

    // MARK: - Commands

    /// Sends a command to the robot and waits for its response.
    /// - Throws: ``RelayClientError/deviceOffline(message:)`` when the robot is not connected,
    ///   ``RelayClientError/rateLimited(message:)`` when the relay dropped it,
    ///   ``RelayClientError/timeout`` and ``RelayClientError/notConnected``.
    public func send(command name: String, data: JSON = [:], timeout: Duration? = nil) async throws -> CommandResponse {
        guard let connection else { throw RelayClientError.notConnected }
        commandCount += 1
        let id = "app-\(commandCount)"
        let limit = timeout ?? configuration.commandTimeout
        pending[id] = PendingCommand(timeout: Task { [weak self] in
            try? await Task.sleep(for: limit)
            if !Task.isCancelled { await self?.resolve(id, .failure(.timeout)) }
        })
        let text = JSON.object(["type": "command", "id": .string(id), "command": .string(name), "data": data]).text
        do {
            try await connection.send(text: text)
        } catch {
            resolve(id, .failure(.notConnected))
        }
        return try await withCheckedThrowingContinuation { continuation in
            guard var command = pending[id] else { return continuation.resume(throwing: RelayClientError.notConnected) }
            if let early = command.early {
                pending[id] = nil
                continuation.resume(with: early.mapError { $0 as any Error })
            } else {
                command.continuation = continuation
                pending[id] = command
            }
        }
    }

    private func resolve(_ id: String, _ result: Result<CommandResponse, RelayClientError>) {
        guard var command = pending[id] else { return }
        command.timeout?.cancel()
        if let continuation = command.continuation {
            pending[id] = nil
            continuation.resume(with: result.mapError { $0 as any Error })
        } else if command.early == nil {
            command.early = result
            pending[id] = command
        }
    }

    private func failAllPending(_ error: RelayClientError) {
        for id in Array(pending.keys) { resolve(id, .failure(error)) }
    }

    // MARK: - TURN

    /// A TURN credential before its `refresh_at`: fetched from `/api/turn/credentials` on first
    /// use, then refreshed in the background shortly before each `refresh_at`.
    public func turnCredentials() async throws -> TurnCredentials {
        if let turn, turn.isFresh() { return turn }
        let fetch = turnFetch ?? Task { [configuration, httpBase] in
            try await fetchTurnCredentials(base: httpBase, token: configuration.token, ttl: configuration.turnTTL,
                                           session: configuration.urlSession)
        }
        turnFetch = fetch
        defer { turnFetch = nil }
        let fetched = try await fetch.value
        if turn.map({ fetched.expiresAt >= $0.expiresAt }) ?? true {
            turn = fetched
            scheduleTurnRefresh(after: max(0, fetched.refreshAt.timeIntervalSinceNow - min(Double(fetched.ttl) / 20, 30)))
        }
        return turn ?? fetched
    }

    private func scheduleTurnRefresh(after seconds: Double) {
        turnRefresher?.cancel()
        turnRefresher = Task { [weak self] in
            try? await Task.sleep(for: .seconds(seconds))
            guard !Task.isCancelled, let self else { return }
            await self.refreshTurn()
        }
    }

    private func refreshTurn() async {
        turn = nil  // stale from now on: the next call fetches
        do {
            _ = try await turnCredentials()
        } catch RelayClientError.unauthorized, RelayClientError.forbidden {
            return  // the token is no good: the socket's state says so too
        } catch {
            scheduleTurnRefresh(after: 5)
        }
    }

    // MARK: - The connection loop

    private func run() async {
        var backoff = configuration.backoff
        while !Task.isCancelled {
            setState(.connecting)
            let socket: any WebSocketConnection
            do {
                socket = try await configuration.transport.connect(
                    to: socketURL, headers: ["Authorization": "Bearer \(configuration.token)"])
            } catch let refused as WebSocketUpgradeRefused {
                let body = (try? JSON(parsing: refused.body)) ?? .null
                let code = body["error"]?.stringValue ?? "http_\(refused.status)"
                let message = body["message"]?.stringValue ?? refused.body
                switch refused.status {
                case 401: return finish(.unauthorized(code: code, message: message))
                case 403: return finish(.forbidden(code: code, message: message))
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
            connection = socket
            backoff.reset()
            setState(.connected)
            let opened = ContinuousClock.now
            var closeCode: UInt16?
            var closeReason = ""
            for await event in socket.events {
                switch event {
                case .text(let text): handle(text)
                case .binary: break
                case .closed(let code, let reason): (closeCode, closeReason) = (code, reason)
                }
            }
            connection = nil
            failAllPending(.notConnected)
            if Task.isCancelled { break }
            switch closeCode {
            case 4003: return finish(.revoked(reason: closeReason))
            case let code? where (code == 1001 || code == 1012) && ContinuousClock.now - opened >= .seconds(2):
                continue  // at once: the balancer picks a live node (one that keeps closing
                          // fresh sockets at once gets the back-off below)
            case 4008, 4029: await pause(backoff.nextDelay(slow: true))
            default: await pause(backoff.nextDelay())
            }
        }
    }

    private func pause(_ delay: Duration) async {
        setState(.waiting(retryIn: delay))
        try? await Task.sleep(for: delay)
    }

    private func setState(_ new: ConnectionState) {
        guard new != state else { return }
        state = new
        eventSink.yield(.connection(new))
    }

    /// Stops for good: pending commands fail, refreshes stop, the event stream ends.
    private func finish(_ reason: RelayClientError) {
        failAllPending(reason == .stopped ? .stopped : .notConnected)
        turnRefresher?.cancel()
        setState(.stopped(reason))
        eventSink.finish()
    }

    private func handle(_ text: String) {
        guard let message = try? JSON(parsing: text) else {
            eventSink.yield(.message(raw: text))
            return
        }
        let id = message["id"]?.stringValue
        switch message["type"]?.stringValue {
        case "response":
            guard let id else { return }
            resolve(id, .success(CommandResponse(id: id, ok: message["ok"]?.boolValue ?? true,
                                                 data: message["data"] ?? .null, error: message["error"], message: message)))
        case "error" where id.map { pending[$0] != nil } ?? false:
            let text = message["message"]?.stringValue ?? ""
            switch message["code"]?.stringValue {
            case "device_offline": resolve(id!, .failure(.deviceOffline(message: text)))
            case "rate_limited": resolve(id!, .failure(.rateLimited(message: text)))
            default: resolve(id!, .failure(.invalidResponse(text)))
            }
        default:
            eventSink.yield(RelayEvent(message: message, raw: text))
        }
    }
}

/// The robot's answer to a command.
public struct CommandResponse: Sendable, Equatable {
    /// The id this client gave the command.
    public var id: String
    /// The robot's `ok` (true when it sent none).
    public var ok: Bool
    /// The robot's `data`.
    public var data: JSON
    /// The robot's `error` when `ok` is false.
    public var error: JSON?
    /// The whole response.
    public var message: JSON
}
