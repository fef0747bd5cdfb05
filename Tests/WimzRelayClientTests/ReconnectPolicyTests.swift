import Foundation
import Testing
import RelayTestSupport
@testable import WimzRelayClient

/// What a phone does to the client (network changes come in bursts, often while a connect is
/// under way) never overrides what the relay's close code says.
@Suite struct ReconnectPolicyTests {
    @Test func aReconnectAskedForDuringAConnectDoesNotOutliveItAndARevocationStillStops() async throws {
        let f = try await onThread { try RelayFixture() }
        let transport = SlowConnectTransport(delay: .milliseconds(500))
        let client = makeClient(f, transport: transport)
        let log = EventLog(client)
        await client.start()
        _ = try await log.waitFor(isState(.connecting))
        try await Task.sleep(for: .milliseconds(100))
        await client.reconnectNow()  // the path changed while the socket was being opened
        let (_, connected) = try await log.waitFor(isState(.connected))
        let tokenID = try #require(f.tokenIDs[f.appTokens["dev1"]!])
        #expect(try await onThread { try Subprocess.cli(["token", "revoke", String(tokenID)], databaseURL: f.database.url) }.status == 0)
        let (stopped, _) = try await log.waitFor(after: connected + 1, timeout: 5) {
            if case .connection(.stopped) = $0 { true } else { false }
        }
        // 4003 is final: no reconnect attempt after it (which would end as "unauthorized").
        guard case .connection(.stopped(.revoked)) = stopped else {
            Issue.record("stopped as \(stopped), not as revoked")
            return
        }
        #expect(transport.connects == 1)
    }

    @Test func aReconnectAskedForDuringAWaitEndsTheWait() async throws {
        let f = try await onThread { try RelayFixture() }
        let client = makeClient(f) { config in config.backoff = Backoff(base: .seconds(30), cap: .seconds(30)) }
        let log = EventLog(client)
        await client.start()
        let (_, connected) = try await log.waitFor(isState(.connected))
        // A close code with a back-off: the relay's restart (1012 on a young socket).
        f.relay.stop(signal: SIGKILL)
        let (_, waiting) = try await log.waitFor(after: connected + 1) { if case .connection(.waiting) = $0 { true } else { false } }
        let asked = ContinuousClock.now
        await client.reconnectNow()
        _ = try await log.waitFor(after: waiting + 1, timeout: 5, isState(.connecting))
        #expect(ContinuousClock.now - asked < .seconds(2), "the 30 s wait was cut short")
        await client.stop()
    }
}

/// The NIO transport with a slow connect, counting connects.
private final class SlowConnectTransport: WebSocketTransport, @unchecked Sendable {
    private let inner = NIOWebSocketTransport()
    private let delay: Duration
    private let count = Locked(0)
    var connects: Int { count.withLock { $0 } }
    init(delay: Duration) { self.delay = delay }
    func connect(to url: URL, headers: [String: String]) async throws -> any WebSocketConnection {
        count.withLock { $0 += 1 }
        try await Task.sleep(for: delay)
        return try await inner.connect(to: url, headers: headers)
    }
}
