import Foundation

// MARK: - TURN: the credential on demand, its refreshes, and their stream

extension RelayClient {
    /// A TURN credential before its `refresh_at`: fetched from `/api/turn/credentials` on first
    /// use, then refreshed in the background shortly before each `refresh_at`. A cancelled
    /// caller gets `CancellationError` at once (a fetch other callers share goes on for them).
    public func turnCredentials() async throws -> TurnCredentials {
        try Task.checkCancellation()
        if let turn, turn.isFresh() { return turn }
        let fetch = turnFetch ?? Task { [configuration, httpBase, token = currentToken, retry = requestRetry] in
            try await fetchTurnCredentials(base: httpBase, token: token, ttl: configuration.turnTTL,
                                           session: configuration.urlSession, retry: retry)
        }
        turnFetch = fetch
        defer { if turnFetch == fetch { turnFetch = nil } }
        let fetched = try await cancellable { try await fetch.value }
        if turn.map({ fetched.expiresAt >= $0.expiresAt }) ?? true {
            if turn != fetched { turnSink.yield(fetched) }
            turn = fetched
            scheduleTurnRefresh(after: max(0, fetched.refreshAt.timeIntervalSinceNow - min(Double(fetched.ttl) / 20, 30)))
        }
        return turn ?? fetched
    }

    /// The TURN credential as it changes, for a view that hands it to WebRTC: the current one
    /// first (fetched on first use), then each one the client's background refresh fetches
    /// before the last one's `refresh_at` — no polling. A first fetch that fails is tried again
    /// with capped back-off (2 s doubling to a minute, jittered; not after 401/403: the token is
    /// no good, and ``state`` says so). It ends when the client stops or the caller's loop does.
    public nonisolated func turnCredentialUpdates() -> AsyncStream<TurnCredentials> {
        let updates = turnSink.subscribe(bufferingNewest: 1)
        let (stream, sink) = AsyncStream.makeStream(of: TurnCredentials.self, bufferingPolicy: .bufferingNewest(1))
        let watcher = Task { [weak self] in
            var last = await self?.firstTurnCredentials()
            if let last { sink.yield(last) }
            for await update in updates where update != last {
                sink.yield(update)
                last = update
            }
            sink.finish()
        }
        sink.onTermination = { _ in watcher.cancel() }
        return stream
    }

    /// ``turnCredentials()`` until it answers, with back-off; nil once the token is refused, the
    /// client stopped or the caller was cancelled.
    private func firstTurnCredentials() async -> TurnCredentials? {
        var backoff = Backoff(base: .seconds(2), cap: .seconds(60))
        while !Task.isCancelled, runner != nil || !started {
            do {
                return try await turnCredentials()
            } catch RelayClientError.unauthorized, RelayClientError.forbidden {
                return nil
            } catch {
                do { try await configuration.clock.sleep(backoff.nextDelay()) } catch { return nil }
            }
        }
        return nil
    }

    private func scheduleTurnRefresh(after seconds: Double) {
        turnRefresher?.cancel()
        let clock = configuration.clock
        turnRefresher = Task { [weak self] in
            do { try await clock.sleep(.seconds(seconds)) } catch { return }
            await self?.refreshTurn()
        }
    }

    private func refreshTurn() async {
        turn = nil  // stale from now on: the next call fetches
        do {
            _ = try await turnCredentials()
        } catch RelayClientError.unauthorized, RelayClientError.forbidden {
            return  // the token is no good: the socket's state says so too
        } catch {
            scheduleTurnRefresh(after: 5)
        }
    }
}
