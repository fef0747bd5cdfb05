import Foundation
import Testing
@testable import WimzRelayClient

// Timing-bound async tests: in WimzRelayClientTests, whose run has the cooperative thread pool
// to itself (the daemon's blocking socket tests starve it, scripts/test.sh).

/// Completion handlers that misbehave as URLSession's do (called twice on a cancel, or never):
/// the wait ends exactly once, by the first answer, the timeout or the caller's cancellation.
@Suite struct OneShotTests {
    @Test func aHandlerCalledTwiceResumesOnce() async throws {
        try await firstAnswer(within: .seconds(5)) { done in
            done(nil)
            done(URLError(.cancelled))  // a second call: no second resume (a checked continuation would trap)
        }
        await #expect(throws: URLError.self) {
            try await firstAnswer(within: .seconds(5)) { done in
                DispatchQueue.global().async { done(URLError(.networkConnectionLost)); done(nil) }
            }
        }
    }

    @Test func aHandlerNeverCalledEndsAtTheTimeout() async throws {
        let started = ContinuousClock.now
        await #expect(throws: RelayClientError.timeout) {
            try await firstAnswer(within: .milliseconds(200)) { _ in }
        }
        #expect(ContinuousClock.now - started < .seconds(2))
    }

    @Test func theCallersCancellationEndsTheWait() async throws {
        let waiting = Task { try await firstAnswer(within: .seconds(3600)) { _ in } }
        try await Task.sleep(for: .milliseconds(100))
        let started = ContinuousClock.now
        waiting.cancel()
        await #expect(throws: CancellationError.self) { try await waiting.value }
        #expect(ContinuousClock.now - started < .seconds(1))
    }

    @Test func everyWaiterGetsTheFirstValue() async {
        let shot = OneShot<Int>()
        async let first = shot.value()
        async let second = shot.value()
        shot.resolve(1)
        shot.resolve(2)
        #expect(await [first, second, shot.value()] == [1, 1, 1])
    }
}
