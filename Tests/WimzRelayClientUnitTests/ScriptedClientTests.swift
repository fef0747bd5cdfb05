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
        let (clock, transport, client, socket) = try await connectedScriptedClient()
        socket.answersPings = false
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
