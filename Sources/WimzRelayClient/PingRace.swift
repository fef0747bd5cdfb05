import Foundation

/// Whether `socket` answers a ping within `limit`. Whichever comes first, the pong or the
/// deadline, decides, and the other is not waited for: a transport's ping may ignore
/// cancellation, and a pong that never comes (a flow a carrier NAT dropped without a word) must
/// not hold the check until TCP gives up, many minutes later on a phone.
func answersPing(_ socket: any WebSocketConnection, within limit: Duration) async -> Bool {
    let verdict = FirstVerdict()
    return await withTaskCancellationHandler {
        await withCheckedContinuation { continuation in
            verdict.await(continuation)
            let deadline = Task {
                try? await Task.sleep(for: limit)
                verdict.decide(false)
            }
            Task {
                verdict.decide((try? await socket.ping()) != nil)
                deadline.cancel()
            }
        }
    } onCancel: {
        verdict.decide(false)
    }
}

/// A race's one answer: the first ``decide(_:)`` resumes the waiting continuation (now, or as
/// soon as it waits); later ones change nothing.
private final class FirstVerdict: Sendable {
    private let state = Locked<(waiting: CheckedContinuation<Bool, Never>?, answer: Bool?)>((nil, nil))

    func await(_ continuation: CheckedContinuation<Bool, Never>) {
        let decided = state.withLock { state -> Bool? in
            if state.answer == nil { state.waiting = continuation }
            return state.answer
        }
        if let decided { continuation.resume(returning: decided) }
    }

    func decide(_ answer: Bool) {
        let waiting = state.withLock { state -> CheckedContinuation<Bool, Never>? in
            guard state.answer == nil else { return nil }
            state.answer = answer
            defer { state.waiting = nil }
            return state.waiting
        }
        waiting?.resume(returning: answer)
    }
}
