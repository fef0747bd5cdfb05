import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
import Testing
import RelayTestSupport
@testable import WimzRelayClient

/// A link that dies without a word, as a phone on cellular meets it: the relay process frozen
/// (SIGSTOP: no FIN, no reset, no pong), with the real NIO transport. The client's own state
/// stream must say so within twice the liveness interval, and connect again once the relay
/// answers (SIGCONT).
@Suite struct DeadLinkTests {
    @Test func aFrozenRelayIsNoticedInTimeAndTheClientConnectsAgainWhenItAnswers() async throws {
        let f = try await onThread { try RelayFixture() }
        let client = makeClient(f) { config in config.livenessInterval = .seconds(2) }
        let log = EventLog(client)
        await client.start()
        let (_, connected) = try await log.waitFor(isState(.connected))
        kill(f.relay.pid, SIGSTOP)
        let frozenAt = ContinuousClock.now
        var resumed = false
        defer { if !resumed { kill(f.relay.pid, SIGCONT) } }
        let (_, noticed) = try await log.waitFor(after: connected + 1, timeout: 10) { event in
            if case .connection(let state) = event { state != .connected } else { false }
        }
        let took = ContinuousClock.now - frozenAt
        // Twice the interval, and a second for the watchdog's tick and a loaded machine's scheduling.
        #expect(took < .seconds(5), "noticed after \(took)")
        #expect(await client.state != .connected)

        kill(f.relay.pid, SIGCONT)
        resumed = true
        _ = try await log.waitFor(after: noticed + 1, timeout: 15, isState(.connected))
        await client.stop()
    }

    /// A relay that accepts the connection and then says nothing: the upgrade is bounded by the
    /// transport's connect timeout, and stop() does not wait for it, nor for a frozen socket's
    /// closing handshake.
    @Test func stopReturnsPromptlyWhileConnectingOrConnectedToAFrozenRelay() async throws {
        let f = try await onThread { try RelayFixture() }
        kill(f.relay.pid, SIGSTOP)
        defer { kill(f.relay.pid, SIGCONT) }
        let connecting = makeClient(f)
        let log = EventLog(connecting)
        await connecting.start()
        _ = try await log.waitFor(isState(.connecting))
        try await Task.sleep(for: .milliseconds(300))  // the TCP handshake done, the upgrade unanswered
        var started = ContinuousClock.now
        await connecting.stop()
        #expect(ContinuousClock.now - started < .seconds(1), "stop() while connecting")

        kill(f.relay.pid, SIGCONT)
        let connected = makeClient(f)
        let connectedLog = EventLog(connected)
        await connected.start()
        _ = try await connectedLog.waitFor(isState(.connected))
        kill(f.relay.pid, SIGSTOP)
        started = ContinuousClock.now
        await connected.stop()
        #expect(ContinuousClock.now - started < .seconds(3), "stop() while connected (a 2 s close handshake at most)")
    }

    /// A call to a relay that does not answer (a listener that never accepts: the kernel takes the
    /// connection and the request, nothing replies) ends the moment its task is cancelled, with
    /// `CancellationError`: TURN credentials, a fetch other callers would share, whatever URLSession
    /// would otherwise wait for. (A household call takes the same path, but on Linux's URLSession
    /// its request sometimes fails on its own first, as `notConnected`.)
    @Test func cancelledHTTPCallsReturnAtOnce() async throws {
        let silent = try SilentListener()
        defer { silent.close() }
        var configuration = RelayClient.Configuration(url: URL(string: "http://127.0.0.1:\(silent.port)")!, deviceID: "dev1",
                                                      token: "wimz_a_silent")
        configuration.urlSession = URLSession(configuration: .ephemeral)
        let client = RelayClient(configuration)
        let calls: [(String, Task<Void, any Error>)] = [
            ("turnCredentials", Task { _ = try await client.turnCredentials() }),
        ]
        try await Task.sleep(for: .milliseconds(300))  // each request sent, none answered
        for (name, call) in calls {
            let started = ContinuousClock.now
            call.cancel()
            await #expect(throws: CancellationError.self, "\(name)") { try await call.value }
            #expect(ContinuousClock.now - started < .seconds(1), "\(name) took \(ContinuousClock.now - started)")
        }
    }

    @Test func anUnansweredUpgradeEndsAtTheConnectTimeout() async throws {
        let f = try await onThread { try RelayFixture() }
        kill(f.relay.pid, SIGSTOP)
        defer { kill(f.relay.pid, SIGCONT) }
        let transport = NIOWebSocketTransport(connectTimeout: .seconds(1))
        let started = ContinuousClock.now
        await #expect(throws: (any Error).self) {
            _ = try await transport.connect(to: URL(string: "ws://127.0.0.1:\(f.port)/ws/app?device_id=dev1")!,
                                            headers: ["Authorization": "Bearer \(f.appTokens["dev1"]!)"])
        }
        #expect(ContinuousClock.now - started < .seconds(3))
    }

    @Test func aPingThatIgnoresCancellationDoesNotHoldTheCheck() async throws {
        let stuck = StuckPing()
        let started = ContinuousClock.now
        #expect(await answersPing(stuck, within: .milliseconds(200)) == false)
        #expect(ContinuousClock.now - started < .seconds(1))
        stuck.release()
        #expect(await answersPing(AnsweringPing(), within: .seconds(5)) == true)
    }
}

/// A connection whose ping never returns until released, and ignores cancellation meanwhile.
private final class StuckPing: WebSocketConnection, @unchecked Sendable {
    private let waiting = Locked<[CheckedContinuation<Void, Never>]>([])
    let events = AsyncStream<WebSocketEvent> { $0.finish() }
    func send(text: String) async throws {}
    func send(binary: [UInt8]) async throws {}
    func ping() async throws {
        await withCheckedContinuation { continuation in waiting.withLock { $0.append(continuation) } }
        throw RelayClientError.notConnected
    }
    func close(code: UInt16) async { release() }
    func release() { for continuation in waiting.withLock({ list in defer { list = [] }; return list }) { continuation.resume() } }
}

private struct AnsweringPing: WebSocketConnection {
    let events = AsyncStream<WebSocketEvent> { $0.finish() }
    func send(text: String) async throws {}
    func send(binary: [UInt8]) async throws {}
    func ping() async throws {}
    func close(code: UInt16) async {}
}

/// A TCP listener on loopback that never accepts: connections complete in the kernel's backlog
/// and what they send is never read or answered.
private final class SilentListener {
    let port: UInt16
    private let fd: Int32

    init() throws {
        let listener = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        var length = socklen_t(MemoryLayout<sockaddr_in>.size)
        let bound = withUnsafeMutablePointer(to: &address) { pointer in
            pointer.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                bind(listener, $0, length) == 0 && listen(listener, 16) == 0 && getsockname(listener, $0, &length) == 0
            }
        }
        guard listener >= 0, bound else { throw RelayClientError.notConnected }
        fd = listener
        port = UInt16(bigEndian: address.sin_port)
    }

    func close() { _ = Glibc.close(fd) }
}
