import Foundation
import Testing
import RelayTestSupport
@testable import WimzRelayClient
import WimzRobot

/// Collects a client's events (the stream has one reader) so tests can wait for one.
actor EventLog {
    private(set) var events: [RelayEvent] = []
    private var ended = false

    init(_ client: RelayClient) {
        Task { [self] in
            for await event in client.events { await self.append(event) }
            await self.end()
        }
    }

    private func append(_ event: RelayEvent) { events.append(event) }
    private func end() { ended = true }
    var hasEnded: Bool { ended }

    /// Waits for the first event after `index` matching `match`; returns it and its position.
    func waitFor(after index: Int = 0, timeout: Double = 10, _ match: (RelayEvent) -> Bool) async throws -> (RelayEvent, Int) {
        let deadline = Date().addingTimeInterval(timeout)
        while Date() < deadline {
            if let position = events.indices.dropFirst(index).first(where: { match(events[$0]) }) {
                return (events[position], position)
            }
            try await Task.sleep(for: .milliseconds(20))
        }
        throw TestSetupError("no matching event within \(timeout) s; got \(events)")
    }
}

/// Wraps the real transport so a test can cut the app's connection (the relay keeps its state).
final class SeverableTransport: WebSocketTransport, @unchecked Sendable {
    private let inner = NIOWebSocketTransport()
    private let lock = NSLock()
    private var connections: [any WebSocketConnection] = []
    var count: Int { lock.withLock { connections.count } }

    func connect(to url: URL, headers: [String: String]) async throws -> any WebSocketConnection {
        let connection = try await inner.connect(to: url, headers: headers)
        lock.withLock { connections.append(connection) }
        return connection
    }

    /// Closes the newest connection from the app's side, as a dropped cellular link would end it.
    func severNewest() async {
        guard let newest = lock.withLock({ connections.last }) else { return }
        await newest.close(code: 1000)
    }
}

/// Runs blocking test-support calls (fixtures, test sockets) on a thread of their own, so they
/// never hold one of the few cooperative-pool threads the client's tasks need.
func onThread<T: Sendable>(_ body: @escaping @Sendable () throws -> T) async throws -> T {
    try await withCheckedThrowingContinuation { continuation in
        Thread.detachNewThread { continuation.resume(with: Result { try body() }) }
    }
}

func isOnline(_ online: Bool) -> (RelayEvent) -> Bool {
    { if case .deviceStatus(let status) = $0 { status.online == online } else { false } }
}

func isState(_ state: ConnectionState) -> (RelayEvent) -> Bool {
    { $0 == .connection(state) }
}

func makeClient(_ f: RelayFixture, token: String? = nil, transport: (any WebSocketTransport)? = nil,
                configure: (inout RelayClient.Configuration) -> Void = { _ in }) -> RelayClient {
    var configuration = RelayClient.Configuration(url: URL(string: "http://127.0.0.1:\(f.port)")!, deviceID: "dev1",
                                                  token: token ?? f.appTokens["dev1"]!)
    configuration.backoff = Backoff(base: .milliseconds(100), cap: .milliseconds(400))
    if let transport { configuration.transport = transport }
    configure(&configuration)
    return RelayClient(configuration)
}

/// Answers the next command the robot gets with `{"ok":true,"data":{"echo":NAME}}`.
func answerNextCommand(_ robot: WebSocketTestClient) throws -> String {
    let command = try robot.receive(until: { $0["type"] as? String == "command" })
    let id = command["id"] as! String
    let name = command["command"] as! String
    try robot.send(#"{"type":"response","id":"\#(id)","ok":true,"data":{"echo":"\#(name)"}}"#)
    return name
}

@Suite struct RelayClientTests {
    @Test func commandRoundTripWithTheClientsOwnIDs() async throws {
        let f = try await onThread { try RelayFixture() }
        let robot = try await onThread { try f.robot() }
        let client = makeClient(f)
        let log = EventLog(client)
        await client.start()
        _ = try await log.waitFor(isOnline(true))

        async let answered = onThread { try answerNextCommand(robot) }
        let response = try await client.send(command: "treat", data: ["count": 2])
        #expect(try await answered == "treat")
        #expect(response.ok && response.id == "app-1" && response.data == ["echo": "treat"])
        // The token travels in the Authorization header, never in the URL.
        #expect(client.socketURL.absoluteString == "ws://127.0.0.1:\(f.port)/ws/app?device_id=dev1")
        await client.stop()
        #expect(await client.state == .stopped(.stopped))
    }

    @Test func anOfflineRobotIsATypedError() async throws {
        let f = try await onThread { try RelayFixture() }
        let client = makeClient(f)
        let log = EventLog(client)
        await client.start()
        _ = try await log.waitFor(isOnline(false))
        await #expect(throws: RelayClientError.deviceOffline(message: "the robot is not connected")) {
            try await client.send(command: "sit")
        }
        await client.stop()
    }

    @Test func aRateLimitedCommandIsATypedError() async throws {
        // One message, then one every 100 s: however slowly the first is answered, the second is over.
        let f = try await onThread { try RelayFixture(environment: ["WIMZ_APP_RATE_LIMIT": "0.01", "WIMZ_APP_RATE_BURST": "1"]) }
        let robot = try await onThread { try f.robot() }
        let client = makeClient(f) { $0.commandTimeout = .seconds(5) }
        let log = EventLog(client)
        await client.start()
        _ = try await log.waitFor(isOnline(true))
        async let answered = onThread { try answerNextCommand(robot) }
        _ = try await client.send(command: "first")
        _ = try await answered
        let refusal = await #expect(throws: RelayClientError.self) { try await client.send(command: "second") }
        guard case .rateLimited(let message)? = refusal else { Issue.record("not rate-limited: \(String(describing: refusal))"); return }
        #expect(message.hasSuffix("messages/s; message dropped"))
        await client.stop()
    }

    @Test func replayAfterReconnect() async throws {
        let f = try await onThread { try RelayFixture() }
        let robot = try await onThread { try f.robot() }
        let transport = SeverableTransport()
        // The relay's v1 replay (an app that does not ask for missed-event recovery).
        let client = makeClient(f, transport: transport) { $0.recoverMissedEvents = false }
        let log = EventLog(client)
        await client.start()
        _ = try await log.waitFor(isOnline(true))
        try robot.send(#"{"type":"event","event":"mission_progress","data":{"status":"watching","trick":"sit","stage":3,"total_stages":5,"progress":3.0,"target_sec":5.0},"timestamp":"2026-11-22T10:00:00Z"}"#)
        let (first, position) = try await log.waitFor { if case .missionProgress? = $0.robotEvent { true } else { false } }

        await transport.severNewest()
        // The relay replays the latest mission_progress to the new socket, right after device_status.
        let (replayed, _) = try await log.waitFor(after: position + 1) { if case .missionProgress? = $0.robotEvent { true } else { false } }
        #expect(transport.count == 2)
        #expect(replayed == first)
        guard case .missionProgress(let progress)? = replayed.robotEvent else { return }
        #expect(progress.model?.trick == "sit" && progress.model?.stage == 3 && progress.model?.totalStages == 5
                && progress.model?.fraction == 0.6)
        await client.stop()
    }

    @Test func reconnectsAfterARelayRestart() async throws {
        let f = try await onThread { try RelayFixture() }
        let client = makeClient(f)
        let log = EventLog(client)
        await client.start()
        let (_, firstConnect) = try await log.waitFor(isState(.connected))
        // SIGTERM: close 1001, and nobody listens for a moment; then a new relay on the same port.
        let again = try await onThread {
            f.relay.stop()
            let again = try RelayDaemon(databaseURL: f.database.url, arguments: ["--listen", "127.0.0.1:\(f.port)"])
            try again.waitUntilReady()
            return again
        }
        defer { again.stop() }
        _ = try await log.waitFor(after: firstConnect + 1, timeout: 15, isState(.connected))

        let robot = try await onThread {
            try WebSocketTestClient.connect(port: f.port, role: "robot", device: "dev1", token: f.robotTokens["dev1"], useHeader: true)
        }
        let (_, online) = try await log.waitFor(after: firstConnect + 1, isOnline(true))
        #expect(online > firstConnect)
        async let answered = onThread { try answerNextCommand(robot) }
        #expect(try await client.send(command: "come").ok)
        _ = try await answered
        await client.stop()
    }

    @Test func revocationStopsReconnecting() async throws {
        let f = try await onThread { try RelayFixture() }
        let client = makeClient(f)
        let log = EventLog(client)
        await client.start()
        _ = try await log.waitFor(isState(.connected))
        let tokenID = f.tokenIDs[f.appTokens["dev1"]!]!
        #expect(try await onThread { try Subprocess.cli(["token", "revoke", String(tokenID)], databaseURL: f.database.url) }.status == 0)
        _ = try await log.waitFor(timeout: 5) { if case .connection(.stopped(.revoked)) = $0 { true } else { false } }
        try await Task.sleep(for: .seconds(1))  // several back-off periods
        #expect(await log.hasEnded)
        #expect(f.relay.log.filter { $0.contains("\"event\":\"ws_connected\"") && $0.contains("\"role\":\"app\"") }.count == 1)
        await #expect(throws: RelayClientError.notConnected) { try await client.send(command: "sit") }
    }

    @Test func refusedTokensStopWithATypedError() async throws {
        let f = try await onThread { try RelayFixture(devices: ["dev1", "dev2"]) }
        let unknown = makeClient(f, token: "wimz_a_" + String(repeating: "x", count: 43))
        let unknownLog = EventLog(unknown)
        await unknown.start()
        _ = try await unknownLog.waitFor(isState(.stopped(.unauthorized(code: "unknown_token", message: "unknown token"))))

        let foreign = makeClient(f, token: f.appTokens["dev2"]!)
        let foreignLog = EventLog(foreign)
        await foreign.start()
        _ = try await foreignLog.waitFor { if case .connection(.stopped(.forbidden(code: "wrong_device", _))) = $0 { true } else { false } }
        // The refusal's log line may reach our pipe reader after the client has read the 403.
        #expect(try await onThread { f.relay.waitForLog(containing: "\"status\":403", timeout: 3) } != nil)
        #expect(f.relay.log.filter { $0.contains("\"path\":\"/ws/app") && $0.contains("\"status\":40") }.count == 2)
    }

    @Test func turnCredentialsAreCachedAndRefreshedBeforeRefreshAt() async throws {
        let f = try await onThread { try RelayFixture(environment: ["WIMZ_TURN_URLS": "turn:127.0.0.1:3478?transport=udp",
                                               "WIMZ_TURN_SECRET": "static-secret-for-tests-0123456789",
                                               "WIMZ_TURN_TTL": "20", "WIMZ_TURN_TTL_MIN": "20"]) }
        let client = makeClient(f)
        let first = try await client.turnCredentials()
        #expect(first.ttl == 20 && first.iceServers.first?.urls == ["stun:127.0.0.1:3478"])
        #expect(first.iceServers.last?.username == first.username)
        #expect(try await client.turnCredentials() == first)
        // refresh_at is 10 s after issue; the client refreshes 1 s (ttl/20) before it by itself.
        let fetches = try await onThread { f.relay.waitForLogLines(count: 2, timeout: 15, where: isTurnFetch) }
        #expect(fetches.count == 2)
        let second = try await client.turnCredentials()
        #expect(second.username != first.username && second.isFresh())
        // Issued (to the relay's second) no later than the first's refresh_at: fetched ahead of it.
        #expect(second.expiresAt.addingTimeInterval(-Double(second.ttl)) <= first.refreshAt)
    }

    @Test(.timeLimit(.minutes(1))) func turnCredentialUpdatesHandOverEachRefreshUnasked() async throws {
        let f = try await onThread { try RelayFixture(environment: ["WIMZ_TURN_URLS": "turn:127.0.0.1:3478?transport=udp",
                                               "WIMZ_TURN_SECRET": "static-secret-for-tests-0123456789",
                                               "WIMZ_TURN_TTL": "20", "WIMZ_TURN_TTL_MIN": "20"]) }
        let client = makeClient(f)
        var updates = client.turnCredentialUpdates().makeAsyncIterator()
        let first = try #require(await updates.next())
        #expect(first.ttl == 20)
        // Nobody asks again: the next one is the client's own refresh, 1 s before refresh_at.
        let second = try #require(await updates.next())
        #expect(second.username != first.username && second.expiresAt > first.expiresAt)
        #expect(try await client.turnCredentials() == second)
        let fetches = try await onThread { f.relay.waitForLogLines(count: 2, timeout: 5, where: isTurnFetch) }
        #expect(fetches.count == 2)
        await client.stop()
        #expect(await updates.next() == nil)
    }
}

/// A TURN credential request the relay answered 200, as its log line reads.
private func isTurnFetch(_ line: String) -> Bool {
    line.contains("/api/turn/credentials") && line.contains("\"status\":200")
}
