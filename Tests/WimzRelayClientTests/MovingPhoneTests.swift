import Foundation
import Testing
import RelayTestSupport
@testable import WimzRelayClient
import WimzRobot

/// A connection the test can freeze: nothing more arrives and pings go unanswered, as when a
/// NAT silently dropped the flow.
final class FreezableTransport: WebSocketTransport, @unchecked Sendable {
    private let inner = NIOWebSocketTransport()
    private let lock = NSLock()
    private var connections: [Freezable] = []
    var count: Int { lock.withLock { connections.count } }

    func connect(to url: URL, headers: [String: String]) async throws -> any WebSocketConnection {
        let connection = Freezable(inner: try await inner.connect(to: url, headers: headers), frozen: Locked(false))
        lock.withLock { connections.append(connection) }
        return connection
    }

    /// From now on the newest connection delivers nothing and answers no ping.
    func freezeNewest() { lock.withLock { connections.last }?.frozen.withLock { $0 = true } }

    final class Freezable: WebSocketConnection, @unchecked Sendable {
        let inner: any WebSocketConnection
        let frozen: Locked<Bool>
        let events: AsyncStream<WebSocketEvent>
        init(inner: any WebSocketConnection, frozen: Locked<Bool>) {
            self.inner = inner
            self.frozen = frozen
            let (events, sink) = AsyncStream.makeStream(of: WebSocketEvent.self)
            self.events = events
            Task {
                for await event in inner.events {
                    if case .closed = event { sink.yield(event); break }
                    if !frozen.withLock({ $0 }) { sink.yield(event) }
                }
                sink.finish()
            }
        }
        func send(text: String) async throws { try await inner.send(text: text) }
        func send(binary: [UInt8]) async throws { try await inner.send(binary: binary) }
        /// Frozen, a ping neither answers nor fails nor notices its caller's cancellation (as a
        /// checked continuation without a cancellation handler behaves): it ends with the
        /// connection.
        func ping() async throws {
            if frozen.withLock({ $0 }) {
                await withCheckedContinuation { continuation in
                    let ended = stalledPings.withLock { pings -> Bool in
                        guard let waiting = pings else { return true }
                        pings = waiting + [continuation]
                        return false
                    }
                    if ended { continuation.resume() }
                }
                throw RelayClientError.notConnected
            }
            try await inner.ping()
        }
        private let stalledPings = Locked<[CheckedContinuation<Void, Never>]?>([])
        private func endStalledPings() {
            for continuation in stalledPings.withLock({ pings in defer { pings = nil }; return pings ?? [] }) {
                continuation.resume()
            }
        }
        func close(code: UInt16) async {
            endStalledPings()
            await inner.close(code: code)
        }
        func abort() async {
            endStalledPings()
            await inner.abort()
        }
    }
}

/// Issue 19's phone behaviour against the real relay: missed events recovered across a drop,
/// tokens that change, reconnects on demand and on silence, several listeners, raw messages,
/// pairing.
@Suite struct MovingPhoneTests {
    @Test func aDropLosesNoEvent() async throws {
        let f = try await onThread { try RelayFixture() }
        let robot = try await onThread { try f.robot() }
        let transport = SeverableTransport()
        let client = makeClient(f, transport: transport)
        let log = EventLog(client)
        await client.start()
        _ = try await log.waitFor(isOnline(true))
        try robot.send(#"{"type":"event","event":"bark_detected","data":{"n":0}}"#)
        _ = try await log.waitFor { if case .barkDetected? = $0.robotEvent { true } else { false } }
        await transport.severNewest()
        // Sent while the phone is away (the client waits 100–400 ms before it reconnects).
        for n in 1...5 { try robot.send(#"{"type":"event","event":"bark_detected","data":{"n":\#(n)}}"#) }
        let (resumed, at) = try await log.waitFor { if case .deviceStatus(let s) = $0 { s.recovered == true } else { false } }
        #expect(transport.count == 2, "\(resumed)")
        try robot.send(#"{"type":"event","event":"bark_detected","data":{"n":6}}"#)
        _ = try await log.waitFor(after: at) { if case .barkDetected(let e)? = $0.robotEvent { e.data["n"]?.intValue == 6 } else { false } }
        let barks = await log.events.compactMap { event -> Int? in
            if case .barkDetected(let e)? = event.robotEvent { e.data["n"]?.intValue } else { nil }
        }
        #expect(barks == [0, 1, 2, 3, 4, 5, 6], "every event once, in order")
        await client.stop()
    }

    @Test func anExpiredOrUnknownTokenIsRenewedByTheProviderAndTheReasonReachesTheApp() async throws {
        let f = try await onThread { try RelayFixture() }
        let good = f.appTokens["dev1"]!
        let calls = Locked(0)
        let client = makeClient(f) { config in
            config.tokenProvider = {
                calls.withLock { $0 += 1; return $0 } == 1 ? "wimz_a_unknown" : good
            }
        }
        let log = EventLog(client)
        await client.start()
        _ = try await log.waitFor(isState(.connected))
        #expect(calls.withLock { $0 } == 2)
        await client.stop()

        let stuck = makeClient(f) { config in config.tokenProvider = { "wimz_a_unknown" } }
        let stuckLog = EventLog(stuck)
        await stuck.start()
        let (stopped, _) = try await stuckLog.waitFor { if case .connection(.stopped) = $0 { true } else { false } }
        #expect(stopped == .connection(.stopped(.unauthorized(code: "unknown_token", message: "unknown token"))))
    }

    @Test func reconnectNowAndSilenceReconnectAtOnce() async throws {
        let f = try await onThread { try RelayFixture() }
        let transport = FreezableTransport()
        let client = makeClient(f, transport: transport) { config in config.livenessInterval = .seconds(1) }
        let log = EventLog(client)
        await client.start()
        _ = try await log.waitFor(isState(.connected))
        // A network change: a new socket without the back-off.
        let (_, first) = try await log.waitFor(isState(.connected))
        await client.reconnectNow()
        let (_, second) = try await log.waitFor(after: first + 1, isState(.connected))
        #expect(transport.count == 2)
        #expect(await log.events[first...second].allSatisfy { if case .connection(.waiting) = $0 { false } else { true } })
        // A socket that went silent (NAT dropped it): found by the liveness ping within 2 intervals.
        transport.freezeNewest()
        let frozenAt = Date()
        let (_, third) = try await log.waitFor(after: second + 1, timeout: 5, isState(.connected))
        #expect(transport.count == 3 && third > second)
        #expect(Date().timeIntervalSince(frozenAt) < 6, "two 1 s liveness intervals and a reconnect")
        await client.stop()
    }

    @Test func severalListenersRawMessagesAndPairing() async throws {
        let f = try await onThread { try RelayFixture() }
        let robot = try await onThread { try f.robot() }
        let client = makeClient(f)
        let second = client.subscribe()
        let log = EventLog(client)
        await client.start()
        _ = try await log.waitFor(isOnline(true))
        try await client.send(text: #"{"type":"webrtc_offer","sdp":"v=0"}"#)
        let sdp = try await onThread { try robot.receive(until: { $0["type"] as? String == "webrtc_offer" })["sdp"] as? String }
        #expect(sdp == "v=0")
        try robot.sendBinary([1, 2, 3])
        _ = try await log.waitFor { $0 == .binary([1, 2, 3]) }
        var seenBySecond = false
        for await event in second where event == .binary([1, 2, 3]) {
            seenBySecond = true
            break
        }
        #expect(seenBySecond)
        await client.stop()

        // Pairing: the robot mints a code, the app redeems it for a token that connects.
        let minted = try await onThread {
            try HTTPTestClient.request(port: f.port, method: "POST", path: "/api/devices/dev1/pairing-codes",
                                       headers: ["Authorization": "Bearer \(f.robotTokens["dev1"]!)"]).json()["code"] as? String
        }
        let code = try #require(minted)
        let paired = try await RelayClient.pair(relay: URL(string: "http://127.0.0.1:\(f.port)")!, code: code, label: "test phone")
        #expect(paired.deviceID == "dev1" && paired.token.hasPrefix("wimz_a_"))
        await #expect(throws: RelayClientError.self) {
            _ = try await RelayClient.pair(relay: URL(string: "http://127.0.0.1:\(f.port)")!, code: code, label: "again")
        }
        let paired2 = makeClient(f, token: paired.token)
        let log2 = EventLog(paired2)
        await paired2.start()
        _ = try await log2.waitFor(isOnline(true))
        await paired2.stop()
    }
}
