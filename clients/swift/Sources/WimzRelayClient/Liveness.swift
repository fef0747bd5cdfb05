import Foundation

// How the client tells a live link from a dead one, and waits that always end.

extension RelayClient {
    /// Pings when the socket has been quiet for ``Configuration/livenessInterval``; no pong by
    /// twice the interval after the last sign of life: the socket is dead (a NAT dropped it, the
    /// relay froze): reconnect at once, whatever the transport's ping does meanwhile.
    func watchLiveness(of socket: any WebSocketConnection) async {
        let interval = configuration.livenessInterval
        while !Task.isCancelled {
            try? await Task.sleep(for: min(interval / 4, .seconds(1)))
            let quiet = ContinuousClock.now - lastHeard
            guard !Task.isCancelled, quiet >= interval else { continue }
            // The pong must come by twice the interval after the last sign of life.
            let answered = await answersPing(socket, within: interval * 2 - quiet)
            if Task.isCancelled { return }
            if answered {
                lastHeard = .now
            } else {
                endingOnPurpose = true
                await socket.abort()
                return
            }
        }
    }
}

/// Whether `socket` answers a ping within `limit`. Whichever comes first, the pong or the
/// deadline, decides, and the other is not waited for: a transport's ping may ignore
/// cancellation, and a pong that never comes (a flow a carrier NAT dropped without a word) must
/// not hold the check until TCP gives up, many minutes later on a phone.
func answersPing(_ socket: any WebSocketConnection, within limit: Duration) async -> Bool {
    let verdict = OneShot<Bool>()
    let deadline = Task {
        try? await Task.sleep(for: limit)
        verdict.resolve(false)
    }
    Task {
        verdict.resolve((try? await socket.ping()) != nil)
        deadline.cancel()
    }
    return await withTaskCancellationHandler { await verdict.value() } onCancel: { verdict.resolve(false) }
}

/// The first answer of a completion handler that may be called twice, or never (URLSession's
/// `sendPing` when a task is cancelled or aborted), bounded by `timeout` and the caller's
/// cancellation: exactly one of them ends the wait, and later calls change nothing.
func firstAnswer(within timeout: Duration,
                 _ start: (@escaping @Sendable ((any Error)?) -> Void) -> Void) async throws {
    let answer = OneShot<Result<Void, any Error>>()
    let deadline = Task {
        try? await Task.sleep(for: timeout)
        answer.resolve(.failure(RelayClientError.timeout))
    }
    defer { deadline.cancel() }
    start { error in answer.resolve(error.map { .failure($0) } ?? .success(())) }
    try await withTaskCancellationHandler {
        try await answer.value().get()
    } onCancel: {
        answer.resolve(.failure(CancellationError()))
    }
}

/// A value set once: the first ``resolve(_:)`` hands it to whoever waits (now, or as soon as
/// they wait); later ones change nothing. Each waiter's continuation is resumed exactly once.
final class OneShot<Value: Sendable>: Sendable {
    private let state = Locked<(waiting: [CheckedContinuation<Value, Never>], value: Value?)>(([], nil))

    func resolve(_ value: Value) {
        let waiting = state.withLock { state -> [CheckedContinuation<Value, Never>] in
            guard state.value == nil else { return [] }
            state.value = value
            defer { state.waiting = [] }
            return state.waiting
        }
        for continuation in waiting { continuation.resume(returning: value) }
    }

    func value() async -> Value {
        await withCheckedContinuation { continuation in
            let resolved = state.withLock { state -> Value? in
                if state.value == nil { state.waiting.append(continuation) }
                return state.value
            }
            if let resolved { continuation.resume(returning: resolved) }
        }
    }
}
