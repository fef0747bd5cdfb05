import Foundation

// Opening a socket on a lossy link: attempts staggered, the first to open wins.

/// Opens a WebSocket as a phone on a lossy link should: one attempt, then another every `stagger`
/// while none has opened (at most `attempts` in all), the first to open wins and the others are
/// cancelled or, if they open anyway, closed. A lost SYN or upgrade then costs at most `stagger`
/// instead of the kernel's retransmission back-off (1, 3, 7 s…) or the transport's whole timeout;
/// after an outage the next try is never more than `stagger` away. The race ends in an error
/// when every attempt started so far has failed (a refused connection fails at once: no hammering
/// of a relay that is down) or at once when the relay refused the upgrade (its answer is the
/// same for every attempt).
func openRacing(_ transport: any WebSocketTransport, to url: URL, headers: [String: String], clock: RelayClientClock,
                stagger: Duration = .seconds(1), attempts: Int = 8) async throws -> any WebSocketConnection {
    let race = ConnectRace()
    var started: [Task<Void, Never>] = []
    defer { for attempt in started { attempt.cancel() } }  // the losers: a socket that opens anyway is closed
    return try await withTaskCancellationHandler {
        for attempt in 1...max(1, attempts) {
            race.begin()
            started.append(Task {
                do {
                    let socket = try await transport.connect(to: url, headers: headers)
                    if !race.opened(socket) { await socket.close(code: 1000) }
                } catch {
                    race.failed(error)
                }
            })
            guard attempt < attempts else { break }
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

/// The state of one `openRacing`: attempts in flight, the last failure, and its verdict (the
/// winning socket or the error), set once.
final class ConnectRace: Sendable {
    private let state = Locked<(inFlight: Int, lastError: (any Error)?, decided: Bool)>((0, nil, false))
    let verdict = OneShot<Result<any WebSocketConnection, any Error>>()

    var isDecided: Bool { state.withLock { $0.decided } }

    func begin() { state.withLock { $0.inFlight += 1 } }

    /// Whether `socket` won (the first to open); a loser is the caller's to close.
    func opened(_ socket: any WebSocketConnection) -> Bool {
        let won = state.withLock { state -> Bool in
            state.inFlight -= 1
            defer { state.decided = true }
            return !state.decided
        }
        if won { verdict.resolve(.success(socket)) }
        return won
    }

    func failed(_ error: any Error) {
        let give = state.withLock { state -> Bool in
            state.inFlight -= 1
            state.lastError = error
            guard !state.decided, error is WebSocketUpgradeRefused || state.inFlight == 0 else { return false }
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

    /// The caller gave up: the race ends in `CancellationError`, a socket that opens later is closed.
    func cancel() {
        let first = state.withLock { state -> Bool in
            defer { state.decided = true }
            return !state.decided
        }
        if first { verdict.resolve(.failure(CancellationError())) }
    }
}
