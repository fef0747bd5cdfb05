import RelayCore
import RelayWorkers

/// Handshakes and requests waiting for their token to be read from the store: each presented
/// digest is asked of the store monitor once (`CredentialQueue`, answered in batches), and
/// everyone waiting for it is resumed together when the answer is in the cache. A wait ends at
/// the latest after `hold` (the store unreachable): the waiter is resumed and finds nothing,
/// which its check answers 503 `store_unavailable`.
///
/// Bounded: at most `capacity` requests wait at once (each is a held connection), and the queue
/// to the monitor is bounded alike; past either a request is not made to wait (503 with
/// `Retry-After`). Requests from addresses over their failure limit — guessing tokens, or one
/// bad client behind a carrier NAT with good phones — share `failingShare` of those places:
/// their guesses can neither fill the wait nor drive the store, and a good token from such an
/// address is still read (good credentials are never refused for the limit). Service thread only.
final class CredentialLookups {
    /// Requests waiting at once, over every digest. A node's descriptors (20,000 here) bound its
    /// connections anyway; this keeps a storm of made-up tokens from holding all of them.
    static let defaultCapacity = 10_000
    /// Of those, the most from addresses over their failure limit.
    static let defaultFailingShare = 256

    /// What became of a request asked to wait.
    enum Outcome: Equatable {
        /// It waits: `resume` will be called.
        case waiting
        /// `capacity` requests wait, or the monitor's queue is full: not asked (503).
        case full
        /// The failing addresses' share is taken: not asked (429).
        case failingShareFull
    }

    let capacity: Int
    let failingShare: Int
    private let queue: CredentialQueue
    private let clock: RelayClock
    private let hold: UInt64
    /// One waiting request: how to resume it, and whether it holds a failing address's place.
    private typealias Waiter = (failing: Bool, resume: () -> Void)
    /// The requests waiting for each digest, with when the first began.
    private var waiting: [DigestKey: (since: UInt64, waiters: [Waiter])] = [:]
    private var deadlines = DeadlineFIFO<(digest: DigestKey, since: UInt64)>()
    /// Requests waiting now, over every digest (the unit of `capacity`), and those of them from
    /// failing addresses (the unit of `failingShare`).
    private(set) var waitingRequests = 0
    private(set) var failingWaiters = 0
    /// Lookups asked, and waits that ended at the hold without an answer.
    private(set) var asked = 0
    private(set) var timedOut = 0
    /// Requests not made to wait: the bound or the monitor's queue reached (503); the failing
    /// addresses' share taken (429).
    private(set) var refusedFull = 0
    private(set) var refusedFailingAddress = 0

    init(queue: CredentialQueue, clock: RelayClock, holdSeconds: Double, capacity: Int = CredentialLookups.defaultCapacity,
         failingShare: Int = CredentialLookups.defaultFailingShare) {
        self.queue = queue
        self.clock = clock
        self.capacity = capacity
        self.failingShare = failingShare
        hold = UInt64(holdSeconds * 1e9)
    }

    /// Tokens being read now (one lookup serves every request waiting for it).
    var tokensBeingRead: Int { waiting.count }

    /// Has `resume` called (on the service thread) once `digest`'s token is in the cache or the
    /// hold has passed — `.waiting` — unless there is no room (`resume` is then never called).
    /// `failingAddress`: the request comes from an address over its failure limit.
    func wait(for digest: [UInt8], failingAddress: Bool = false, then resume: @escaping () -> Void) -> Outcome {
        if failingAddress, failingWaiters >= failingShare {
            refusedFailingAddress += 1
            return .failingShareFull
        }
        guard waitingRequests < capacity else {
            refusedFull += 1
            return .full
        }
        let key = DigestKey(digest)
        if waiting[key] != nil {
            waiting[key]!.waiters.append((failingAddress, resume))
        } else {
            guard ask(key) else {
                refusedFull += 1
                return .full
            }
            let now = clock.monotonic()
            waiting[key] = (now, [(failingAddress, resume)])
            deadlines.append((key, now), deadline: now + hold)
        }
        waitingRequests += 1
        if failingAddress { failingWaiters += 1 }
        return .waiting
    }

    /// Asks for `digest` without waiting (a check that could not wait: TLS served by lws, or a
    /// retry after the hold), when the monitor's queue has room.
    func prefetch(_ digest: [UInt8]) {
        let key = DigestKey(digest)
        guard waiting[key] == nil else { return }
        _ = ask(key)
    }

    /// Asks for the tokens with `ids` again (after the listener reconnected; answered by
    /// `StoreEvent.credentialsRechecked`).
    func recheck(ids: [Int64]) { queue.recheck(ids: ids) }

    private func ask(_ digest: DigestKey) -> Bool {
        guard queue.lookUp(digest) else { return false }
        asked += 1
        return true
    }

    /// The store answered for `digests` (already in the cache): their waiters go on.
    func answered(_ digests: [[UInt8]]) {
        for digest in digests {
            guard let wait = waiting.removeValue(forKey: DigestKey(digest)) else { continue }
            resume(wait.waiters)
        }
    }

    /// Waits past the hold end now (every wheel tick).
    func expire(now: UInt64) {
        for (digest, since) in deadlines.popExpired(now: now) {
            guard let wait = waiting[digest], wait.since == since else { continue }
            waiting[digest] = nil
            timedOut += 1
            resume(wait.waiters)
        }
    }

    private func resume(_ resumed: [Waiter]) {
        waitingRequests -= resumed.count
        failingWaiters -= resumed.count { $0.failing }
        for waiter in resumed { waiter.resume() }
    }
}
