import Foundation
import Logging
import RelayCore
import RelayStore

/// Writes audit events, TURN issuance rows and token last-used times in batches on its own
/// thread, so forwarding never waits for the database. Nothing is lost when the database is
/// briefly unreachable: events and issuances stay queued and are retried; at shutdown, or when
/// the queue grows past `spoolThreshold`, they are appended to a spool file (JSON lines) that is
/// replayed into the database on the next successful connection. Ids (an issuance shares its
/// audit event's) make replays idempotent. Last-used times are a hint, kept to the minute: they
/// are written once a minute (and at stop), not spooled.
public final class AuditWriter: DatabaseWork {
    struct State {
        var queue: [AuditEvent] = []
        var lastUsed: [Int64: UnixTime] = [:]
        var issuances: [TurnIssuance] = []
        var spooled = 0
        var written = 0
        var rejected = 0
        var unmade = 0
        var databaseUp = false
        /// When (monotonic nanoseconds) the queued last-used times are next written.
        var touchesDue: UInt64 = 0
        /// A write failed since the last one that succeeded: its transaction may have been
        /// committed all the same (a connection lost before the answer), so the queued events
        /// are written with the conflict check until one succeeds again.
        var mayBeStored = false
    }

    private let spoolPath: String
    /// Where events and issuances the database refused for good are kept (JSON lines, as in the
    /// spool), so that one bad row neither holds the queue nor is lost.
    private let rejectedPath: String
    private let spoolThreshold: Int
    private let state = Locked(State())
    private let thread: DatabaseThread
    private let log = Logger(label: "wimz.audit")

    public init(conninfo: String, node: String? = nil, spoolDirectory: String, spoolThreshold: Int = 100_000) {
        spoolPath = (spoolDirectory as NSString).appendingPathComponent("audit-spool.jsonl")
        rejectedPath = (spoolDirectory as NSString).appendingPathComponent("audit-rejected.jsonl")
        self.spoolThreshold = spoolThreshold
        thread = DatabaseThread(name: "audit_writer", conninfo: conninfo, node: node)
        try? FileManager.default.createDirectory(atPath: spoolDirectory, withIntermediateDirectories: true)
    }

    /// Queues an event. Never blocks on I/O.
    public func record(_ event: AuditEvent) {
        let count = state.withLock { s -> Int in
            s.queue.append(event)
            return s.queue.count
        }
        if count == 1 || count % AuditRepository.maxBatch == 0 { thread.wake() }
    }

    /// An event that could not be made (`AuditTrail.event`): logged and counted.
    public func unmade(_ kind: AuditKind, _ error: Error) {
        state.withLock { $0.unmade += 1 }
        log.error("audit_event_unmade", metadata: ["event": "\(kind.rawValue)", "error": "\(error)"])
    }

    /// Events that could not be made, so far.
    public var unmadeCount: Int { state.withLock { $0.unmade } }

    /// Queues a TURN issuance row (its audit event is recorded separately and is the durable copy).
    public func record(_ issuance: TurnIssuance) {
        state.withLock { $0.issuances.append(issuance) }
    }

    /// Notes that a token was used now (written in batches to `token_uses`).
    public func touch(tokenID: Int64, at time: UnixTime) {
        state.withLock { $0.lastUsed[tokenID] = time }
    }

    /// Events waiting in memory, events moved to the spool file, events stored so far, and
    /// events the database refused (kept in `audit-rejected.jsonl`).
    public var stats: (queued: Int, spooled: Int, written: Int, rejected: Int, databaseUp: Bool) {
        state.withLock { ($0.queue.count, $0.spooled, $0.written, $0.rejected, $0.databaseUp) }
    }

    public func start() { thread.start(self) }

    /// Flushes what it can within `timeout` seconds, spools the rest, and joins the thread. If
    /// the thread is stuck in a query, what is queued is spooled from here (replays are
    /// idempotent, so an event both written and spooled is stored once).
    public func stop(timeout: Double = 3) {
        if !thread.stop(timeout: timeout + 1) { spoolQueued() }
    }

    /// Moves everything queued (events and issuances) to the spool file.
    private func spoolQueued() {
        let (events, issuances) = state.withLock { s in
            defer {
                s.queue.removeAll()
                s.issuances.removeAll()
            }
            return (s.queue, s.issuances)
        }
        spool(events, issuances)
    }

    // MARK: DatabaseWork

    public var channels: [String] { [] }

    /// A new connection first stores what an outage spooled.
    public func connected(_ db: PGConnection) throws {
        try replaySpool(db)
        state.withLock { $0.databaseUp = true }
    }

    public func step(_ db: PGConnection, on thread: DatabaseThread) throws {
        // Asleep only while nothing is queued: what the last flush left waits out the linger.
        if state.withLock({ $0.queue.isEmpty }) { thread.wait(milliseconds: 200) }
        // Let a burst gather into one batch (one transaction) rather than a commit per event.
        if thread.isRunning, state.withLock({ !$0.queue.isEmpty && $0.queue.count < AuditRepository.maxBatch }) {
            usleep(UInt32(AuditWriter.linger * 1e6))
        }
        let now = MonotonicClock.nanoseconds()
        let touches = state.withLock { s in
            guard now >= s.touchesDue else { return false }
            s.touchesDue = now + AuditWriter.touchInterval
            return true
        }
        try flush(db, touches: touches, wholeBatchesOnly: thread.isRunning)
    }

    /// Everything stays queued; past `spoolThreshold` events it moves to the spool file.
    public func unavailable(_ error: Error) {
        state.withLock { $0.databaseUp = false }
        log.warning("audit_write_failed", metadata: ["error": "\(error)"])
        if state.withLock({ $0.queue.count + $0.issuances.count }) >= spoolThreshold { spoolQueued() }
    }

    /// Stores what is left if the database is there, and spools the rest.
    public func finish(_ db: PGConnection?) {
        if let db {
            do { try flush(db, touches: true) } catch { log.warning("audit_write_failed", metadata: ["error": "\(error)"]) }
        }
        spoolQueued()
    }

    /// How long the writer waits after the first queued event before writing the batch.
    static let linger = 0.02

    /// How often queued last-used times are written (nanoseconds). They are kept to the minute,
    /// so a minute's uses of any number of tokens cost one statement, and a reconnect storm's
    /// token rows are rewritten after it rather than while its handshakes are being served.
    static let touchInterval: UInt64 = 60_000_000_000

    /// Writes queued issuances, the last-used times when `touches`, and up to one batch of
    /// events in one transaction, until the queue is empty, or with `wholeBatchesOnly` (while
    /// running) until less than a whole batch is left: that waits out the next linger, so a
    /// steady stream goes in one transaction per linger rather than one per commit's worth of
    /// arrivals (a quarter of PostgreSQL's CPU a handshake in `bench-versus.sh connect`).
    /// On failure everything taken goes back.
    private func flush(_ db: PGConnection, touches includeTouches: Bool, wholeBatchesOnly: Bool = false) throws {
        while true {
            // The batch shares the queue's storage when it is all of it (the usual case): no event
            // is copied under the lock, and none is freed there when the batch leaves the queue —
            // the service thread, recording, waits on this lock.
            let (batch, touches, issuances, fresh) = state.withLock { s in
                let touches = includeTouches ? s.lastUsed : [:]
                defer {
                    if includeTouches { s.lastUsed.removeAll() }
                    s.issuances.removeAll()
                }
                let batch = s.queue.count <= AuditRepository.maxBatch ? s.queue : Array(s.queue.prefix(AuditRepository.maxBatch))
                return (batch, touches, s.issuances, !s.mayBeStored)
            }
            if batch.isEmpty && touches.isEmpty && issuances.isEmpty { return }
            let rejected: Int
            do {
                rejected = try write(db, batch, issuances, touches: touches, fresh: fresh)
            } catch {
                state.withLock { s in
                    s.issuances.insert(contentsOf: issuances, at: 0)
                    for (k, v) in touches where s.lastUsed[k] == nil { s.lastUsed[k] = v }
                    s.mayBeStored = true
                }
                throw error
            }
            let left = state.withLock { s in
                s.mayBeStored = false
                s.queue.removeFirst(min(batch.count, s.queue.count))
                s.written += batch.count - rejected
                return s.queue.count
            }
            guard !batch.isEmpty, !(wholeBatchesOnly && left < AuditRepository.maxBatch) else { return }
        }
    }

    /// Writes `events`, `issuances` and `touches` in one transaction; if the database refuses
    /// it for good, one by one (`writeOneByOne`). Returns how many events were refused.
    private func write(_ db: PGConnection, _ events: [AuditEvent], _ issuances: [TurnIssuance],
                       touches: [Int64: UnixTime], fresh: Bool) throws -> Int {
        do {
            try db.transaction {
                try TurnRepository(db).record(issuances)
                try TokenRepository(db).touch(touches)
                try AuditRepository(db).append(events, fresh: fresh)
            }
            return 0
        } catch let error as StoreError where error.refusesData && db.isOpen {
            return try writeOneByOne(db, events, issuances, touches: touches, refusal: error)
        }
    }

    /// A batch the database refused: each part is written in a transaction of its own (with
    /// the conflict checks, so what a broken-off pass stored is skipped the next time), and
    /// what is refused again is moved to the rejected file. Returns how many events were.
    /// Throws, leaving everything queued, when the connection fails on the way.
    private func writeOneByOne(_ db: PGConnection, _ events: [AuditEvent], _ issuances: [TurnIssuance],
                               touches: [Int64: UnixTime], refusal: StoreError) throws -> Int {
        log.error("audit_batch_refused", metadata: ["error": "\(refusal)", "events": .stringConvertible(events.count),
                                                     "turn_issuances": .stringConvertible(issuances.count)])
        func refused(_ write: () throws -> Void) throws -> Bool {
            do {
                try db.transaction(write)
                return false
            } catch let error as StoreError where error.refusesData && db.isOpen {
                log.error("audit_row_refused", metadata: ["error": "\(error)"])
                return true
            }
        }
        let badIssuances = try issuances.filter { issuance in try refused { try TurnRepository(db).record([issuance]) } }
        // Last-used times are hints: refused ones are dropped.
        if !touches.isEmpty { _ = try refused { try TokenRepository(db).touch(touches) } }
        let badEvents = try events.filter { event in try refused { _ = try AuditRepository(db).append([event]) } }
        reject(badEvents, badIssuances)
        return badEvents.count
    }

    private func reject(_ events: [AuditEvent], _ issuances: [TurnIssuance]) {
        guard !events.isEmpty || !issuances.isEmpty else { return }
        state.withLock { $0.rejected += events.count }
        let text = lines(events, issuances)
        var metadata: Logger.Metadata = ["events": .stringConvertible(events.count), "turn_issuances": .stringConvertible(issuances.count),
                                         "path": "\(rejectedPath)"]
        // Without the file the log is the only copy.
        if !append(text, to: rejectedPath) { metadata["lines"] = "\(text)" }
        log.error("audit_rejected", metadata: metadata)
    }

    /// Spool lines that are no event or issuance (a damaged file: a cut line, an id that is not
    /// a UUID) go to `audit-rejected.jsonl` as they are, like rows the database refused.
    private func setAsideUnreadable(_ lines: String) {
        guard !lines.isEmpty else { return }
        var metadata: Logger.Metadata = ["bytes": .stringConvertible(lines.utf8.count), "path": "\(rejectedPath)"]
        if !append(lines, to: rejectedPath) { metadata["lines"] = "\(lines)" }  // the log is the only copy then
        log.warning("audit_spool_line_skipped", metadata: metadata)
    }

    // MARK: - Spool file

    private func spool(_ events: [AuditEvent], _ issuances: [TurnIssuance]) {
        guard !events.isEmpty || !issuances.isEmpty else { return }
        if append(lines(events, issuances), to: spoolPath) {
            state.withLock { $0.spooled += events.count }
            log.warning("audit_spooled", metadata: ["events": .stringConvertible(events.count),
                                                    "turn_issuances": .stringConvertible(issuances.count), "path": "\(spoolPath)"])
        } else {
            log.error("audit_spool_failed", metadata: ["path": "\(spoolPath)", "events": .stringConvertible(events.count),
                                                       "turn_issuances": .stringConvertible(issuances.count)])
        }
    }

    /// The spool's lines for `events` and `issuances` (`SpoolLine`).
    private func lines(_ events: [AuditEvent], _ issuances: [TurnIssuance]) -> String {
        SpoolLine.text(events, issuances) { record, error in
            log.error("audit_line_unwritable", metadata: ["record": "\(record)", "error": "\(error)"])
        }
    }

    /// Appends `text` to `path`, created owner-only; false if it cannot.
    private func append(_ text: String, to path: String) -> Bool {
        guard let handle = FileHandle(forWritingAtPath: path) ?? {
            _ = FileManager.default.createFile(atPath: path, contents: nil, attributes: [.posixPermissions: 0o600])
            return FileHandle(forWritingAtPath: path)
        }() else { return false }
        handle.seekToEndOfFile()
        handle.write(Data(text.utf8))
        try? handle.synchronize()
        try? handle.close()
        return true
    }

    private func replaySpool(_ db: PGConnection) throws {
        guard FileManager.default.fileExists(atPath: spoolPath),
              let data = FileManager.default.contents(atPath: spoolPath) else { return }
        var events: [AuditEvent] = []
        var issuances: [TurnIssuance] = []
        var unreadable = ""
        let decoder = JSONDecoder()
        for line in String(decoding: data, as: UTF8.self).split(separator: "\n") {
            switch SpoolLine(line: line, decoder: decoder) {
            case .event(let event)?: events.append(event)
            case .issuance(let issuance)?: issuances.append(issuance)
            case nil: unreadable += line + "\n"
            }
        }
        setAsideUnreadable(unreadable)
        let rejected = try write(db, events, issuances, touches: [:], fresh: false)
        try FileManager.default.removeItem(atPath: spoolPath)
        state.withLock { $0.written += events.count - rejected }
        log.info("audit_spool_replayed", metadata: ["events": .stringConvertible(events.count),
                                                    "turn_issuances": .stringConvertible(issuances.count)])
    }
}
