import Foundation
import Testing
@testable import WimzRelayClient
import WimzProtocol

/// The client on a scripted transport and a clock the test moves by hand (no relay, no real
/// waiting): a healthy connection wakes for nothing but the relay's pings, a silent one is
/// dropped on time, the back-off is one timer that `reconnectNow()` cuts short, a cancelled
/// command returns at once and leaves nothing behind, and typed commands keep integers exact.
@Suite struct ScriptedClientTests {
    @Test func aHealthyConnectionWakesForNothingButTheRelaysPings() async throws {
        let (clock, _, client, socket) = try await connectedScriptedClient()
        // A minute as the relay keeps it: its ping every 20 s, each re-arming the deadline.
        for second in 1...60 {
            if second % 20 == 0 {
                socket.deliver(.ping)
                try await until { clock.deadlines.contains(clock.now + .seconds(24)) }
            }
            clock.advance(by: .seconds(1))
            await settle()
        }
        #expect(clock.fired == 0, "the client's own timers woke it \(clock.fired) times")
        #expect(socket.pingsSent == 0)
        #expect(await client.state == .connected)
        await client.stop()
    }

    /// The relay frozen (no message, no ping, no pong): with the defaults the client pings at
    /// 24 s, gives up 5 s later and connects again at once — within 29 s of the last sign of life.
    @Test func aSilentLinkIsDroppedWithin29SecondsAndReplacedAtOnce() async throws {
        let (clock, transport) = (ManualClock(), ScriptedTransport())
        let client = RelayClient(scriptedConfiguration(clock, transport))
        await client.start()
        let socket = try await transport.waitForConnection(1)
        socket.answersPings = false
        try await until { await client.state == .connected }
        try await greet(socket, clock)
        #expect(clock.deadlines == [.seconds(24)])
        clock.advance(by: .seconds(23))
        await settle()
        #expect(socket.pingsSent == 0)
        clock.advance(by: .seconds(1))
        // Quiet for 24 s: a ping, and 5 s for its pong.
        try await until { socket.pingsSent == 1 && clock.deadlines == [.seconds(29)] }
        clock.advance(by: .seconds(4))
        await settle()
        #expect(transport.connectionCount == 1 && !socket.isClosed, "dropped before its time")
        clock.advance(by: .seconds(1))
        _ = try await transport.waitForConnection(2)
        #expect(socket.isClosed)
        try await until { await client.state == .connected }
        await client.stop()
    }

    /// A command sent on a link that died without a word: nothing heard 5 s after it went out →
    /// a ping; no pong 5 s later → a fresh socket, 10 s after the command rather than 29 s after
    /// the last sign of life. A command on a live link only brings the probe forward.
    @Test func aCommandOnADeadLinkIsNoticedWithinTenSeconds() async throws {
        let (clock, transport, client, socket) = try await connectedScriptedClient()
        clock.advance(by: .seconds(10))
        await settle()
        socket.answersPings = false
        let command = Task { try await client.send(command: "treat", timeout: .seconds(30)) }
        try await until { socket.sent.count == 1 && clock.deadlines.contains(clock.now + .seconds(5)) }
        clock.advance(by: .seconds(4))
        await settle()
        #expect(socket.pingsSent == 0, "probed before the answer was due")
        clock.advance(by: .seconds(1))
        try await until { socket.pingsSent == 1 }
        clock.advance(by: .seconds(5))
        _ = try await transport.waitForConnection(2)
        #expect(socket.isClosed)
        await #expect(throws: RelayClientError.notConnected) { try await command.value }
        // On the live link the answer re-arms the usual deadline: 24 s after it, no earlier.
        let fresh = try await transport.waitForConnection(2)
        try await until { await client.state == .connected }
        let answered = Task { try await client.send(command: "treat") }
        try await until { fresh.sent.count == 1 }
        let id = try #require(try JSON(parsing: fresh.sent[0])["id"]?.stringValue)
        fresh.deliver(.text(#"{"type":"response","id":"\#(id)","ok":true}"#))
        _ = try await answered.value
        try await until { clock.deadlines == [clock.now + .seconds(24)] }
        #expect(fresh.pingsSent == 0)
        await client.stop()
    }

    @Test func theBackoffIsOneTimerThatReconnectNowCutsShort() async throws {
        let (clock, transport) = (ManualClock(), ScriptedTransport())
        transport.refusal = WebSocketUpgradeRefused(status: 503, headers: [:], body: "")
        let client = RelayClient(scriptedConfiguration(clock, transport))
        await client.start()
        try await until { clock.deadlines.count == 1 }
        await settle()
        guard case .waiting(let delay) = await client.state else { Issue.record("not waiting"); return }
        #expect(clock.deadlines == [clock.now + delay], "one timer for the whole wait, not steps")
        transport.refusal = nil
        await client.reconnectNow()
        _ = try await transport.waitForConnection(1)
        #expect(clock.fired == 0, "the wait ended without its timer firing")
        try await until { await client.state == .connected }
        await client.stop()
    }

    @Test func aCancelledCommandReturnsAtOnceAndLeavesNothingPending() async throws {
        let (_, _, client, socket) = try await connectedScriptedClient()
        let command = Task { try await client.send(command: "treat", data: ["count": 1]) }
        try await until { socket.sent.count == 1 }
        command.cancel()
        await #expect(throws: CancellationError.self) { try await command.value }
        #expect(await client.pendingCommands == 0)
        // The robot's late answer is dropped.
        socket.deliver(.text(#"{"type":"response","id":"app-1","ok":true}"#))
        await settle()
        #expect(await client.pendingCommands == 0)
        // A command cancelled before it was sent is not sent.
        let early = Task {
            withUnsafeCurrentTask { $0?.cancel() }
            return try await client.send(command: "treat")
        }
        await #expect(throws: CancellationError.self) { try await early.value }
        #expect(socket.sent.count == 1)
        await client.stop()
    }

    @Test func stopEndsEveryWait() async throws {
        let (clock, _, client, socket) = try await connectedScriptedClient()
        let command = Task { try await client.send(command: "treat") }
        try await until { socket.sent.count == 1 }
        await client.stop()
        await #expect(throws: RelayClientError.stopped) { try await command.value }
        #expect(await client.pendingCommands == 0)
        #expect(clock.deadlines.isEmpty, "timers left behind: \(clock.deadlines)")
    }

    /// A typed command goes out as `{"type":"command",…}` with its snake_case parameters, and its
    /// reply comes back typed, integers exact; `ok` false is the robot's error, typed.
    @Test func aTypedCommandAndItsReply() async throws {
        struct Feed: RobotCommand {
            typealias Reply = Fed
            static let name = "feed"
            var portionGrams: Int64
        }
        struct Fed: Decodable, Sendable { var servingId: Int64 }
        let (_, _, client, socket) = try await connectedScriptedClient()
        let fed = Task { try await client.send(Feed(portionGrams: 9_007_199_254_740_993)) }
        try await until { socket.sent.count == 1 }
        let frame = try JSON(parsing: socket.sent[0])
        #expect(frame["command"] == "feed" && frame["data"]?["portion_grams"]?.int64Value == 9_007_199_254_740_993)
        let id = try #require(frame["id"]?.stringValue)
        socket.deliver(.text(#"{"type":"response","id":"\#(id)","ok":true,"data":{"serving_id":9007199254740993}}"#))
        #expect(try await fed.value.servingId == 9_007_199_254_740_993)

        let refused = Task { try await client.send(Feed(portionGrams: 1)) }
        try await until { socket.sent.count == 2 }
        let second = try #require(try JSON(parsing: socket.sent[1])["id"]?.stringValue)
        socket.deliver(.text(#"{"type":"response","id":"\#(second)","ok":false,"error":{"code":"empty","message":"no food left"}}"#))
        await #expect(throws: RelayClientError.commandFailed(code: "empty", message: "no food left")) { try await refused.value }
        await client.stop()
    }

    /// In the background the socket closes (1001) and nothing is tried — no attempt, no timer —
    /// however long the app stays there; back in the foreground it connects at once; `stop()`
    /// ends a background wait too.
    @Test func inTheBackgroundTheSocketClosesAndNothingIsTriedUntilTheForeground() async throws {
        let (clock, transport, client, socket) = try await connectedScriptedClient()
        await client.enterBackground()
        try await until { await client.state == .suspended }
        #expect(socket.closeCode == CloseCode.goingAway.rawValue)
        #expect(clock.deadlines.isEmpty, "a timer runs in the background: \(clock.deadlines)")
        clock.advance(by: .seconds(3600))
        await settle()
        #expect(transport.connectionCount == 1 && clock.fired == 0)
        await client.enterForeground()
        _ = try await transport.waitForConnection(2)
        try await until { await client.state == .connected }
        await client.enterBackground()
        try await until { await client.state == .suspended }
        await client.stop()
        #expect(await client.state == .stopped(.stopped))
    }

    /// The URLSession transport's delegate on Linux's FoundationNetworking (which cannot speak
    /// WebSocket, so only an open's failures run here): a connection refused ends the open through
    /// `didCompleteWithError`, and an open asked by a cancelled task says `CancellationError`.
    @Test func theURLSessionTransportsOpenEndsThroughItsDelegate() async throws {
        let transport = URLSessionWebSocketTransport(openTimeout: .seconds(30))
        let started = ContinuousClock.now
        await #expect(throws: RelayClientError.notConnected) {
            _ = try await transport.connect(to: URL(string: "ws://127.0.0.1:9/ws/app")!, headers: [:])
        }
        let cancelled = Task {
            withUnsafeCurrentTask { $0?.cancel() }
            return try await transport.connect(to: URL(string: "ws://127.0.0.1:9/ws/app")!, headers: [:])
        }
        await #expect(throws: CancellationError.self) { _ = try await cancelled.value }
        #expect(ContinuousClock.now - started < .seconds(20), "an open waited for its timeout")
    }

    /// URLSession hands over a refused upgrade's status and headers, never its body: the relay's
    /// `Wimz-Error` header says the token expired, and the client asks its provider for a fresh
    /// one and connects — no second request to learn why.
    @Test func aRefusalWithoutItsBodyIsReadFromTheErrorHeader() async throws {
        let (clock, transport) = (ManualClock(), ScriptedTransport())
        transport.refusal = WebSocketUpgradeRefused(status: 401, headers: ["wimz-error": "expired_token"], body: "")
        let calls = Locked(0)
        var settings = scriptedConfiguration(clock, transport)
        settings.tokenProvider = {
            let call = calls.withLock { count -> Int in
                count += 1
                return count
            }
            if call > 1 { transport.refusal = nil }  // the renewed token is good
            return "wimz_a_\(call)"
        }
        let client = RelayClient(settings)
        await client.start()
        // The provider is asked again at once: no timer between the refusal and the new token.
        _ = try await transport.waitForConnection(1)
        #expect(transport.tokensPresented == ["wimz_a_1", "wimz_a_2"])
        #expect(clock.fired == 0)
        await client.stop()
        // Without a provider the header's code is what the client stops with.
        let refused = ScriptedTransport()
        refused.refusal = WebSocketUpgradeRefused(status: 403, headers: ["wimz-error": "device_disabled"], body: "")
        let stopped = RelayClient(scriptedConfiguration(clock, refused))
        await stopped.start()
        try await until { if case .stopped = await stopped.state { true } else { false } }
        #expect(await stopped.state == .stopped(.forbidden(code: "device_disabled", message: "device_disabled")))
    }
}

/// A started client on a scripted transport and a hand-moved clock, connected.
func connectedScriptedClient() async throws -> (ManualClock, ScriptedTransport, RelayClient, ScriptedConnection) {
    let (clock, transport) = (ManualClock(), ScriptedTransport())
    let client = RelayClient(scriptedConfiguration(clock, transport))
    await client.start()
    let socket = try await transport.waitForConnection(1)
    try await until { await client.state == .connected }
    try await greet(socket, clock)
    return (clock, transport, client, socket)
}

/// What the relay sends every socket as soon as it attaches.
let relayGreeting = #"{"type":"event","event":"device_status","data":{"device_id":"dev1","online":true,"since":"2026-12-01T00:00:00Z"}}"#

/// The relay's greeting on `socket`, and the liveness deadline it re-arms: the whole interval.
func greet(_ socket: ScriptedConnection, _ clock: ManualClock) async throws {
    socket.deliver(.text(relayGreeting))
    try await until { clock.deadlines.contains(clock.now + .seconds(24)) }
}

/// The client's settings for `transport` and `clock`, without missed-event recovery.
func scriptedConfiguration(_ clock: ManualClock, _ transport: ScriptedTransport) -> RelayClient.Configuration {
    var configuration = RelayClient.Configuration(url: URL(string: "http://127.0.0.1:9")!, deviceID: "dev1", token: "wimz_a_test")
    configuration.clock = clock.relayClientClock
    configuration.transport = transport
    configuration.recoverMissedEvents = false
    return configuration
}

/// Lets the client's tasks run what is ready (real time passes only to let them be scheduled).
private func settle() async {
    for _ in 0..<50 { await Task.yield() }
    try? await Task.sleep(for: .milliseconds(2))
}

/// Waits (real time, at most 30 s: only a failure waits that long) until `condition` holds.
/// These tests need the cooperative thread pool: the test command runs them with the client's
/// integration tests, apart from the daemon's tests that block its threads.
func until(_ condition: () async -> Bool) async throws {
    let deadline = ContinuousClock.now + .seconds(30)
    while !(await condition()) {
        guard ContinuousClock.now < deadline else { throw TimedOut() }
        try await Task.sleep(for: .milliseconds(2))
    }
}

struct TimedOut: Error {}

/// A clock moved by hand: sleepers wake when `advance` reaches their deadline; `fired` counts
/// the sleeps that ran to their end (the client's own wake-ups), `deadlines` those still waiting.
final class ManualClock: @unchecked Sendable {
    private let lock = NSLock()
    private var current: Duration = .zero
    private var sleepers: [Int: (deadline: Duration, continuation: CheckedContinuation<Void, any Error>)] = [:]
    private var cancelledEarly: Set<Int> = []
    private var nextID = 0
    private var firedCount = 0

    var now: Duration { lock.withLock { current } }
    var fired: Int { lock.withLock { firedCount } }
    var deadlines: [Duration] { lock.withLock { sleepers.values.map(\.deadline).sorted() } }

    var relayClientClock: RelayClientClock {
        RelayClientClock(now: { self.now }, sleep: { try await self.sleep(for: $0) })
    }

    func sleep(for duration: Duration) async throws {
        let id = lock.withLock { () -> Int in
            nextID += 1
            return nextID
        }
        try await withTaskCancellationHandler {
            try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<Void, any Error>) in
                let cancelled = lock.withLock { () -> Bool in
                    if cancelledEarly.remove(id) != nil { return true }
                    sleepers[id] = (current + duration, continuation)
                    return false
                }
                if cancelled { continuation.resume(throwing: CancellationError()) }
            }
        } onCancel: {
            let sleeper = lock.withLock { () -> CheckedContinuation<Void, any Error>? in
                guard let sleeper = sleepers.removeValue(forKey: id) else {
                    cancelledEarly.insert(id)
                    return nil
                }
                return sleeper.continuation
            }
            sleeper?.resume(throwing: CancellationError())
        }
    }

    func advance(by duration: Duration) {
        let due = lock.withLock { () -> [CheckedContinuation<Void, any Error>] in
            current += duration
            let due = sleepers.filter { $0.value.deadline <= current }
            for id in due.keys { sleepers[id] = nil }
            firedCount += due.count
            return due.map(\.value.continuation)
        }
        for continuation in due { continuation.resume() }
    }
}

/// A transport whose connections the test drives: it delivers what the relay would send and
/// records what the client sends and pings.
final class ScriptedTransport: WebSocketTransport, @unchecked Sendable {
    private let lock = NSLock()
    private var opened: [ScriptedConnection] = []
    private var refusing: WebSocketUpgradeRefused?
    private var tokens: [String] = []
    private var holding = false
    private var held: [CheckedContinuation<Void, Never>] = []

    /// How the next upgrades are refused (nil: they are not).
    var refusal: WebSocketUpgradeRefused? {
        get { lock.withLock { refusing } }
        set { lock.withLock { refusing = newValue } }
    }
    var connectionCount: Int { lock.withLock { opened.count } }
    /// The bearer token of every upgrade asked for, refused or not.
    var tokensPresented: [String] { lock.withLock { tokens } }

    /// Connects wait, whatever the caller's cancellation says (as a TCP connect does), until
    /// `release()`: a lost SYN.
    var holdsConnects: Bool {
        get { lock.withLock { holding } }
        set { lock.withLock { holding = newValue } }
    }
    /// Connects waiting now.
    var heldConnects: Int { lock.withLock { held.count } }

    /// Lets the held connects go on, the first held first.
    func release() {
        let waiting = lock.withLock { () -> [CheckedContinuation<Void, Never>] in
            holding = false
            defer { held = [] }
            return held
        }
        for connect in waiting { connect.resume() }
    }

    func connect(to url: URL, headers: [String: String]) async throws -> any WebSocketConnection {
        lock.withLock { tokens.append(String(headers["Authorization"]?.dropFirst("Bearer ".count) ?? "")) }
        await withCheckedContinuation { (go: CheckedContinuation<Void, Never>) in
            let now = lock.withLock { () -> Bool in
                if !holding { return true }
                held.append(go)
                return false
            }
            if now { go.resume() }
        }
        return try lock.withLock {
            if let refusing { throw refusing }
            let connection = ScriptedConnection()
            opened.append(connection)
            return connection
        }
    }

    /// The `n`th connection, once the client opened it.
    func waitForConnection(_ n: Int) async throws -> ScriptedConnection {
        try await until { connectionCount >= n }
        return lock.withLock { opened[n - 1] }
    }
}

final class ScriptedConnection: WebSocketConnection, @unchecked Sendable {
    private let lock = NSLock()
    private let stream: AsyncStream<WebSocketEvent>
    private let continuation: AsyncStream<WebSocketEvent>.Continuation
    private var texts: [String] = []
    private var pings = 0
    private var closed = false
    private var closedWith: UInt16?
    private var answering = true
    private var unanswered: [CheckedContinuation<Void, Never>] = []

    init() { (stream, continuation) = AsyncStream.makeStream(of: WebSocketEvent.self) }

    var events: AsyncStream<WebSocketEvent> { stream }
    var sent: [String] { lock.withLock { texts } }
    var pingsSent: Int { lock.withLock { pings } }
    var isClosed: Bool { lock.withLock { closed } }
    /// The code the client closed with (nil: not closed, or dropped without a handshake).
    var closeCode: UInt16? { lock.withLock { closedWith } }
    var answersPings: Bool {
        get { lock.withLock { answering } }
        set { lock.withLock { answering = newValue } }
    }

    func deliver(_ event: WebSocketEvent) { continuation.yield(event) }

    func send(text: String) async throws { lock.withLock { texts.append(text) } }
    func send(binary: [UInt8]) async throws {}

    /// Answered at once, or (`answersPings` false) never while the connection lasts, whatever
    /// the caller's cancellation says: a pong that does not come.
    func ping() async throws {
        await withCheckedContinuation { (pong: CheckedContinuation<Void, Never>) in
            let now = lock.withLock { () -> Bool in
                pings += 1
                if answering || closed { return true }
                unanswered.append(pong)
                return false
            }
            if now { pong.resume() }
        }
    }

    func close(code: UInt16) async { end(code: code) }
    func abort() async { end(code: nil) }

    private func end(code: UInt16?) {
        let waiting = lock.withLock { () -> [CheckedContinuation<Void, Never>] in
            closed = true
            closedWith = code
            defer { unanswered = [] }
            return unanswered
        }
        for pong in waiting { pong.resume() }
        continuation.yield(.closed(code: code, reason: ""))
        continuation.finish()
    }
}
