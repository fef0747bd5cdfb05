import Foundation

// Asking over a lossy link: attempts staggered, the first to succeed wins.

/// Runs `attempt` as a phone on a lossy link should: once, then again every `stagger` while none
/// has succeeded (at most `attempts` in all, each left running), the first success wins and the
/// others are cancelled or, if they succeed anyway, handed to `discard`. A lost packet then costs
/// at most `stagger` instead of the kernel's retransmission back-off (1, 3, 7 s…) or the whole
/// timeout; after an outage the next try is never more than `stagger` away. The race ends in an
/// error when every attempt started so far has failed (an attempt that fails at once, as a refused
/// connection does, ends it: no hammering of a relay that is down) or at once on an error for
/// which `isFinal` holds (the relay's refusal: its answer is the same for every attempt).
func staggered<Value: Sendable>(every stagger: Duration, attempts: Int, clock: RelayClientClock,
                                isFinal: @escaping @Sendable (any Error) -> Bool,
                                discard: @escaping @Sendable (Value) async -> Void = { _ in },
                                _ attempt: @escaping @Sendable () async throws -> Value) async throws -> Value {
    let race = StaggeredRace<Value>(isFinal: isFinal)
    var started: [Task<Void, Never>] = []
    defer { for attempt in started { attempt.cancel() } }  // the losers
    return try await withTaskCancellationHandler {
        for number in 1...max(1, attempts) {
            race.begin()
            started.append(Task {
                do {
                    let value = try await attempt()
                    if !race.succeeded(value) { await discard(value) }
                } catch {
                    race.failed(error)
                }
            })
            guard number < attempts else { break }
            // The next attempt after `stagger`, unless the race is decided first.
            let step = OneShot<Void>()
            let timer = Task {
                try? await clock.sleep(stagger)
                step.resolve(())
            }
            Task {  // ends with the race's verdict, which every way out of here resolves
                _ = await race.verdict.value()
                step.resolve(())
            }
            await step.value()
            timer.cancel()
            if race.isDecided { break }
        }
        race.lastAttemptStarted()
        return try await race.verdict.value().get()
    } onCancel: {
        race.cancel()
    }
}

/// Opens a WebSocket by staggered attempts (``staggered(every:attempts:clock:isFinal:discard:_:)``):
/// a socket that opens after another won is closed; a refused upgrade ends the race.
func openRacing(_ transport: any WebSocketTransport, to url: URL, headers: [String: String], clock: RelayClientClock,
                stagger: Duration = .seconds(1), attempts: Int = 8) async throws -> any WebSocketConnection {
    try await staggered(every: stagger, attempts: attempts, clock: clock, isFinal: { $0 is WebSocketUpgradeRefused },
                        discard: { await $0.close(code: 1000) }) {
        try await transport.connect(to: url, headers: headers)
    }
}

/// The state of one `staggered` race: attempts in flight, the last failure, and its verdict (the
/// winning value or the error), set once.
final class StaggeredRace<Value: Sendable>: Sendable {
    private let state = Locked<(inFlight: Int, lastError: (any Error)?, decided: Bool)>((0, nil, false))
    private let isFinal: @Sendable (any Error) -> Bool
    let verdict = OneShot<Result<Value, any Error>>()

    init(isFinal: @escaping @Sendable (any Error) -> Bool) { self.isFinal = isFinal }

    var isDecided: Bool { state.withLock { $0.decided } }

    func begin() { state.withLock { $0.inFlight += 1 } }

    /// Whether `value` won (the first success); a loser is the caller's to discard.
    func succeeded(_ value: Value) -> Bool {
        let won = state.withLock { state -> Bool in
            state.inFlight -= 1
            defer { state.decided = true }
            return !state.decided
        }
        if won { verdict.resolve(.success(value)) }
        return won
    }

    func failed(_ error: any Error) {
        let give = state.withLock { state -> Bool in
            state.inFlight -= 1
            state.lastError = error
            guard !state.decided, isFinal(error) || state.inFlight == 0 else { return false }
            state.decided = true
            return true
        }
        if give { verdict.resolve(.failure(error)) }
    }

    /// No attempt follows: once those in flight have failed, the race is lost.
    func lastAttemptStarted() {
        let lost = state.withLock { state -> (any Error)? in
            guard !state.decided, state.inFlight == 0 else { return nil }
            state.decided = true
            return state.lastError ?? RelayClientError.notConnected
        }
        if let lost { verdict.resolve(.failure(lost)) }
    }

    /// The caller gave up: the race ends in `CancellationError`, a later success is discarded.
    func cancel() {
        let first = state.withLock { state -> Bool in
            defer { state.decided = true }
            return !state.decided
        }
        if first { verdict.resolve(.failure(CancellationError())) }
    }
}
