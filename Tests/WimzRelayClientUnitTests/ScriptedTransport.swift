import Foundation
import Testing
@testable import WimzRelayClient
import WimzProtocol

// The scripted world the client's unit tests run in: a transport whose connections the test
// drives, a clock it moves by hand, and the waits and set-ups the suites share.

/// A started client on a scripted transport and a hand-moved clock, connected and, unless
/// `greeted` is false, greeted as the relay greets every socket.
func connectedScriptedClient(greeted: Bool = true) async throws -> (ManualClock, ScriptedTransport, RelayClient, ScriptedConnection) {
    let (clock, transport) = (ManualClock(), ScriptedTransport())
    let client = RelayClient(scriptedConfiguration(clock, transport))
    await client.start()
    let socket = try await transport.waitForConnection(1)
    try await until { await client.state == .connected }
    if greeted { try await greet(socket, clock) }
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
func settle() async {
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
