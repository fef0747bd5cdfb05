import Logging
import RelayCore
import RelayStore

/// Cuts removed members' video (docs/protocol.md v1.3 "Removal cuts the video"): a thread of
/// its own, never the service thread, that claims the store's due `turn_cuts` every half second
/// through the database worker's connection (a revocation's trigger writes one; expiries it
/// records itself once a second) and, on every
/// TURN server of `WIMZ_TURN_ADMIN`, lists each issued username's sessions with coturn's `ps`
/// and cancels them with `cs`. A server that can't be reached is retried with back-off (1 s
/// doubling to 30 s) until it answers; servers already done are not asked again. Without
/// `WIMZ_TURN_ADMIN` it only records expiries and marks the cuts done with nothing cut (the
/// relay says so at start).
public final class TurnSessionCutter: ThreadWork {
    public typealias Server = TurnAdminServer

    /// What the cutter did, for `/metrics`.
    public struct Counts: Sendable, Equatable {
        public var cutsDone = 0
        public var cutsRetried = 0
        public var sessionsCut = 0
        public var serverFailures = 0
        public var pending = 0
    }

    private let servers: [Server]
    private let password: String?
    private let node: String
    private let allocationLifetime: Int
    private let worker: DatabaseWorker
    private let thread = DatabaseThread(name: "turn_cutter")
    private let counts = Locked(Counts())
    private let log = Logger(label: "wimz.turn_cut")
    private let lastExpiryScan = Locked<UInt64>(0)

    /// `allocationLifetime`: coturn's longest allocation lifetime (`max-allocate-lifetime`,
    /// seconds): a credential expired longer ago than that has no live allocation left.
    public init(worker: DatabaseWorker, servers: [Server], password: String?, node: String, allocationLifetime: Int) {
        self.worker = worker
        self.servers = servers
        self.password = password
        self.node = node
        self.allocationLifetime = allocationLifetime
    }

    public func start() { thread.start(self) }
    public func stop() { thread.stop() }

    public var stats: Counts { counts.withLock { $0 } }

    // MARK: ThreadWork

    public func step(on thread: DatabaseThread) {
        do {
            try round()
        } catch {
            log.warning("turn_cutter_store_unavailable", metadata: ["reason": "\(error)"])
            thread.wait(milliseconds: 1000)
        }
    }

    /// Every second the expiry scan; every half second the cuts due (each performed on this
    /// thread: coturn's CLI may be slow, and the worker's connection is only borrowed for the
    /// statements).
    private func round() throws {
        let now = MonotonicClock.nanoseconds()
        if now - lastExpiryScan.withLock({ $0 }) >= 1_000_000_000 {
            lastExpiryScan.withLock { $0 = now }
            let window = max(allocationLifetime, 86_400)
            // Expired members: their TURN sessions too, and the `member_expired` audit row.
            let pending = try worker.perform { db in
                let repository = TurnCutRepository(db)
                try repository.recordExpiries(window: window)
                return try repository.pendingCount()
            }
            counts.withLock { $0.pending = pending }
        }
        let (node, lifetime) = (self.node, allocationLifetime)
        let cuts = try worker.perform { try TurnCutRepository($0).claim(node: node, allocationLifetime: lifetime) }
        for cut in cuts { try perform(cut) }
        if cuts.isEmpty { thread.wait(milliseconds: 500) }
    }

    /// How long after a removal the cut is made once more: a credential issued just before the
    /// removal reaches `turn_issuances` through the audit writer's batches (tens of milliseconds), so the
    /// first pass, within milliseconds of the removal, may not know its username yet.
    static let settle = 3.0

    /// Cuts `cut` on every server not done yet, and records the outcome.
    private func perform(_ cut: TurnCutRepository.Cut) throws {
        var done = cut.serversDone
        var sessions = 0
        var errors: [String] = []
        for server in servers where !done.contains(server.name) {
            do {
                sessions += try cutSessions(of: cut.usernames, on: server)
                done.append(server.name)
            } catch {
                errors.append("\(server.name): \(error)")
            }
        }
        // An early pass is followed by a last one on every server after `settle`.
        let early = cut.age < TurnSessionCutter.settle
        let finished = errors.isEmpty && !early
        let retryIn = early && errors.isEmpty ? Int((TurnSessionCutter.settle - cut.age).rounded(.up))
            : min(30, 1 << min(cut.attempts - 1, 5))
        let serversDone = early ? [] : done, error = errors.isEmpty ? nil : errors.joined(separator: "; "), cutCount = sessions
        try worker.perform { db in
            try TurnCutRepository(db).finish(cut, serversDone: serversDone, sessionsCut: cutCount, finished: finished,
                                             error: error, retryIn: retryIn)
        }
        counts.withLock {
            $0.sessionsCut += sessions
            $0.serverFailures += errors.count
            if finished { $0.cutsDone += 1 } else if !errors.isEmpty { $0.cutsRetried += 1 }
        }
        let metadata: Logger.Metadata = ["token_id": .stringConvertible(cut.tokenID), "device": "\(cut.deviceID)",
                                         "reason": "\(cut.reason)", "sessions": .stringConvertible(sessions)]
        if errors.isEmpty {
            log.info(finished ? "turn_sessions_cut" : "turn_sessions_cut_early", metadata: metadata)
        } else {
            log.warning("turn_cut_retry", metadata: metadata.merging(["errors": "\(errors.joined(separator: "; "))",
                                                                      "retry_in_s": .stringConvertible(retryIn)]) { $1 })
        }
    }

    /// Cancels every session of `usernames` on `server`; how many.
    private func cutSessions(of usernames: [String], on server: Server) throws -> Int {
        guard !usernames.isEmpty else { return 0 }
        let cli = try CoturnCLI(host: server.host, port: server.port, password: password)
        var cut = 0
        for username in usernames {
            for id in try cli.sessions(of: username) {
                try cli.cancel(session: id)
                cut += 1
            }
        }
        return cut
    }
}
