import RelayCore
import RelayWorkers

/// Handshakes and requests waiting for their token to be read from the store: each presented
/// digest is asked of the store monitor once (`CredentialQueue`, answered in batches), and
/// everyone waiting for it is resumed together when the answer is in the cache. A wait ends at
/// the latest after `hold` (the store unreachable): the waiter is resumed and finds nothing,
/// which its check answers 503 `store_unavailable`. Service thread only.
final class CredentialLookups {
    private let queue: CredentialQueue
    private let clock: RelayClock
    private let hold: UInt64
    /// The resumes waiting for each digest, with when the first began.
    private var waiting: [[UInt8]: (since: UInt64, resumes: [() -> Void])] = [:]
    private var deadlines = DeadlineFIFO<(digest: [UInt8], since: UInt64)>()
    /// Lookups asked, and waits that ended at the hold without an answer.
    private(set) var asked = 0
    private(set) var timedOut = 0

    init(queue: CredentialQueue, clock: RelayClock, holdSeconds: Double) {
        self.queue = queue
        self.clock = clock
        hold = UInt64(holdSeconds * 1e9)
    }

    var waitingCount: Int { waiting.count }

    /// Calls `resume` (on the service thread) once `digest`'s token is in the cache or the hold
    /// has passed.
    func wait(for digest: [UInt8], then resume: @escaping () -> Void) {
        if waiting[digest] != nil {
            waiting[digest]!.resumes.append(resume)
            return
        }
        let now = clock.monotonic()
        waiting[digest] = (now, [resume])
        deadlines.append((digest, now), deadline: now + hold)
        ask(digest)
    }

    /// Asks for `digest` without waiting (a check that could not wait: TLS served by lws).
    func prefetch(_ digest: [UInt8]) {
        guard waiting[digest] == nil else { return }
        ask(digest)
    }

    /// Asks for the tokens with `ids` again (after the listener reconnected; answered by
    /// `StoreEvent.credentialsRechecked`).
    func recheck(ids: [Int64]) { queue.recheck(ids: ids) }

    private func ask(_ digest: [UInt8]) {
        asked += 1
        queue.lookUp(digests: [digest])
    }

    /// The store answered for `digests` (already in the cache): their waiters go on.
    func answered(_ digests: [[UInt8]]) {
        for digest in digests {
            guard let wait = waiting.removeValue(forKey: digest) else { continue }
            for resume in wait.resumes { resume() }
        }
    }

    /// Waits past the hold end now (every wheel tick).
    func expire(now: UInt64) {
        for (digest, since) in deadlines.popExpired(now: now) {
            guard let wait = waiting[digest], wait.since == since else { continue }
            waiting[digest] = nil
            timedOut += 1
            for resume in wait.resumes { resume() }
        }
    }
}
