import RelayCore

/// What the service thread asks the store monitor to read about tokens: presented tokens it does
/// not hold (by digest), and the tokens it holds, read again after the monitor reconnected (by
/// id). The service thread adds and never waits; the monitor takes everything queued at once, so
/// a storm of handshakes costs one statement per batch, not one per socket. Thread-safe.
public final class CredentialQueue: Sendable {
    struct Batch: Sendable {
        var digests: [[UInt8]] = []
        /// The ids to read again; nil: no recheck asked for (an empty one is still answered).
        var recheck: [Int64]?
    }

    /// Digests as a set: a client retrying through an outage asks once, not once per retry.
    private let pending = Locked((digests: Set<DigestKey>(), recheck: [Int64]?.none))
    private let onQueued = Locked<(@Sendable () -> Void)?>(nil)
    /// Most digests waiting for the monitor: while the database is away nothing drains the
    /// queue, and made-up tokens must not grow it without bound.
    public let capacity: Int

    public init(capacity: Int = 20_000) { self.capacity = capacity }

    /// Asks for the token with this digest (`StoreEvent.credentialsFound` answers); false when
    /// the queue is full and it was not asked.
    public func lookUp(_ digest: [UInt8]) -> Bool { lookUp(DigestKey(digest)) }

    /// `lookUp(_:)` for a digest already made a key.
    public func lookUp(_ digest: DigestKey) -> Bool {
        let (queued, first) = pending.withLock { p -> (Bool, Bool) in
            guard p.digests.count < capacity || p.digests.contains(digest) else { return (false, false) }
            let first = p.digests.isEmpty && p.recheck == nil
            p.digests.insert(digest)
            return (true, first)
        }
        // Only the first of a batch wakes the monitor (a write to its wake-up pipe): it takes
        // everything queued when it runs, and the byte stays in the pipe until it has looked.
        if first { onQueued.current?() }
        return queued
    }

    /// Asks for these tokens again (`StoreEvent.credentialsRechecked` answers).
    public func recheck(ids: [Int64]) {
        pending.withLock { $0.recheck = ($0.recheck ?? []) + ids }
        onQueued.current?()
    }

    /// Everything queued, taken off the queue (the monitor's thread).
    func take() -> Batch {
        pending.withLock { p in
            defer { p = ([], nil) }
            return Batch(digests: p.digests.map(\.bytes), recheck: p.recheck)
        }
    }

    /// Puts back a batch whose read failed: it is asked again after the reconnect.
    func putBack(_ batch: Batch) {
        pending.withLock {
            $0.digests.formUnion(batch.digests.map(DigestKey.init))
            if let ids = batch.recheck { $0.recheck = ids + ($0.recheck ?? []) }
        }
    }

    var isEmpty: Bool { pending.withLock { $0.digests.isEmpty && $0.recheck == nil } }

    /// Digests queued now (the monitor waits for more when they are few).
    var waitingDigests: Int { pending.withLock { $0.digests.count } }

    /// Who to wake when something is queued (the monitor's thread).
    func whenQueued(_ wake: @escaping @Sendable () -> Void) { onQueued.withLock { $0 = wake } }
}
