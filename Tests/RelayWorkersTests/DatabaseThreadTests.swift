import Foundation
import Logging
import RelayCore
import RelayStore
import RelayTestSupport
import Testing
@testable import RelayWorkers

/// Counts what the thread asks of its work; every call is on the database thread.
final class CountingWork: DatabaseWork {
    struct Counts { var connects = 0, steps = 0, failures = 0, finishes = 0, finishedWithConnection = false }
    let counts = Locked(Counts())
    let channels: [String] = []
    func connected(_ db: PGConnection) throws { counts.withLock { $0.connects += 1 } }
    func step(_ db: PGConnection, on thread: DatabaseThread) throws {
        counts.withLock { $0.steps += 1 }
        _ = try db.execute("SELECT 1")
        thread.wait(milliseconds: 50)
    }
    func unavailable(_ error: Error) { counts.withLock { $0.failures += 1 } }
    func finish(_ db: PGConnection?) { counts.withLock { $0.finishes += 1; $0.finishedWithConnection = db != nil } }

    func wait(timeout: Double = 10, until done: (Counts) -> Bool) -> Bool {
        let deadline = Date().addingTimeInterval(timeout)
        while Date() < deadline {
            if done(counts.withLock { $0 }) { return true }
            usleep(10_000)
        }
        return false
    }
}

@Suite struct DatabaseThreadTests {
    @Test func reconnectPolicyDoublesFromTheFirstDelayUpToTheCap() {
        let policy = ReconnectPolicy()
        #expect((1...5).map { policy.delay(afterFailures: $0) } == [0.2, 0.4, 0.8, 1.0, 1.0])
        #expect(policy.delay(afterFailures: 1000) == 1.0)
    }

    @Test func reconnectsAfterTheConnectionIsKilledAndJoinsAtStop() throws {
        let database = try TestDatabase()
        defer { database.drop() }
        let work = CountingWork()
        let thread = DatabaseThread(name: "test", conninfo: database.url)
        thread.start(work)
        #expect(work.wait { $0.steps >= 2 })

        // Another session ends the thread's backend: the next step fails, and the thread
        // replaces the lost connection at once, before the work hears of any outage.
        let admin = try database.connect()
        _ = try admin.execute(
            "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = \(database.name) AND pid <> pg_backend_pid()")
        #expect(work.wait { $0.connects >= 2 && $0.steps >= 4 })
        #expect(work.counts.withLock { $0.failures } == 0)

        #expect(thread.stop())
        let counts = work.counts.withLock { $0 }
        #expect(counts.finishes == 1)
        #expect(counts.finishedWithConnection)
        // Joined: nothing runs after stop returned.
        let steps = counts.steps
        usleep(150_000)
        #expect(work.counts.withLock { $0.steps } == steps)
    }

    @Test func unreachableDatabaseIsReportedAndStopStillJoins() {
        let work = CountingWork()
        let thread = DatabaseThread(name: "test", conninfo: "host=/nonexistent-wimz port=5432 user=postgres dbname=x")
        thread.start(work)
        #expect(work.wait { $0.failures >= 2 })
        #expect(thread.stop())
        let counts = work.counts.withLock { $0 }
        #expect(counts.connects == 0 && counts.steps == 0)
        #expect(counts.finishes == 1 && !counts.finishedWithConnection)
    }

    @Test func databaseWorkerFailsJobsFastWithoutADatabaseAndRunsThemWithOne() throws {
        let down = DatabaseWorker(conninfo: "host=/nonexistent-wimz port=5432 user=postgres dbname=x")
        down.start()
        let failure = Locked<Error?>(nil)
        let started = Date()
        down.submit({ _ in Issue.record("ran without a database") }, failed: { error in failure.withLock { $0 = error } })
        while failure.withLock({ $0 }) == nil, Date().timeIntervalSince(started) < 5 { usleep(10_000) }
        #expect((failure.withLock { $0 } as? StoreError)?.kind == .unavailable)
        down.stop()

        let database = try TestDatabase()
        defer { database.drop() }
        let worker = DatabaseWorker(conninfo: database.url)
        worker.start()
        let answer = Locked<String?>(nil)
        worker.submit({ db in answer.withLock { $0 = try? db.execute("SELECT 40 + 2").first?[0] ?? nil } },
                      failed: { Issue.record("failed: \($0)") })
        while answer.withLock({ $0 }) == nil, Date().timeIntervalSince(started) < 15 { usleep(10_000) }
        #expect(answer.withLock { $0 } == "42")
        worker.stop()
    }

    /// The audit events repositories write on the worker's connection carry the clock it was
    /// given (the relay's; a manual one here), not the system's.
    @Test func theWorkersRepositoriesStampAuditEventsWithItsClock() throws {
        let database = try TestDatabase()
        defer { database.drop() }
        let clock = ManualClock(wall: UnixTime(microseconds: 1_900_000_000_123_000))
        let worker = DatabaseWorker(conninfo: database.url, clock: clock.clock)
        worker.start()
        defer { worker.stop() }
        let done = Locked<Bool?>(nil)
        worker.submit({ db in
            _ = try DeviceRepository(db).add(DeviceID("clocked")!, name: "Rex", actor: "test")
            done.withLock { $0 = true }
        }, failed: { error in
            Issue.record("failed: \(error)")
            done.withLock { $0 = false }
        })
        let started = Date()
        while done.withLock({ $0 }) == nil, Date().timeIntervalSince(started) < 15 { usleep(10_000) }
        let stored = try AuditRepository(try database.connect()).query(deviceID: "clocked").map(\.event)
        #expect(stored.map(\.kind) == [.deviceCreated] && stored.map(\.at) == [clock.wall])
    }

    @Test func databaseWorkerQueueIsBounded() {
        // Not started: nothing drains the queue, so the bound is all that stops it.
        let worker = DatabaseWorker(conninfo: "host=/nonexistent-wimz dbname=x", capacity: 3)
        let accepted = (0..<5).map { _ in worker.submit({ _ in }, failed: { _ in }) }
        #expect(accepted == [true, true, true, false, false])
        #expect(worker.queued == 3)
    }

    /// A steady stream of events goes in one transaction per linger (20 ms), not one per
    /// commit's worth of arrivals: rows of one transaction share their `xmin`.
    @Test func auditWriterBatchesASteadyStreamByTheLinger() throws {
        let database = try TestDatabase()
        defer { database.drop() }
        let spool = try TestEnvironment.scratchDirectory("audit-batches-\(UUID().uuidString)")
        let writer = AuditWriter(conninfo: database.url, spoolDirectory: spool)
        writer.start()
        defer { writer.stop() }
        let started = Date()
        for _ in 0..<100 {  // 1,000 events over ~100 ms or more
            for _ in 0..<10 { writer.record(try AuditRepository.event(.appConnected, at: .now(), actor: "relay", deviceID: "stream")) }
            usleep(1_000)
        }
        let seconds = Date().timeIntervalSince(started)
        let deadline = Date().addingTimeInterval(10)
        while writer.stats.written < 1_000, Date() < deadline { usleep(10_000) }
        #expect(writer.stats.written == 1_000)
        let transactions = try database.connect().execute("SELECT count(DISTINCT xmin::text) FROM audit_log").first?[0]
            .flatMap { Int($0) } ?? 0
        // At most one a linger while the stream lasted, and one for what its end left.
        #expect(transactions >= 1 && transactions <= Int(seconds / AuditWriter.linger) + 2,
                "\(transactions) transactions for a stream of \(seconds) s")
    }

    @Test func auditWriterSpoolsWhatItCannotWriteAndTheNextWriterStoresIt() throws {
        let database = try TestDatabase()
        defer { database.drop() }
        let spool = try TestEnvironment.scratchDirectory("audit-spool-\(UUID().uuidString)")
        let event = try AuditRepository.event(.deviceCreated, at: .now(), actor: "test", deviceID: "spooled1")

        // No database: the event is kept, and spooled at stop.
        let offline = AuditWriter(conninfo: "host=/nonexistent-wimz port=5432 user=postgres dbname=x", spoolDirectory: spool)
        offline.start()
        offline.record(event)
        offline.stop()
        #expect(offline.stats.spooled == 1)
        let spooled = try String(contentsOfFile: spool + "/audit-spool.jsonl", encoding: .utf8)
        #expect(spooled.contains("spooled1"))

        // A writer that reaches the database stores the spool first, once.
        let online = AuditWriter(conninfo: database.url, spoolDirectory: spool)
        online.start()
        let deadline = Date().addingTimeInterval(10)
        while online.stats.written < 1, Date() < deadline { usleep(20_000) }
        online.stop()
        let stored = try AuditRepository(try database.connect()).query(deviceID: "spooled1")
        #expect(stored.map(\.event.id) == [event.id])
        #expect(!FileManager.default.fileExists(atPath: spool + "/audit-spool.jsonl"))
    }

    /// A spool line reads back as the event written. Lines that are no event (a damaged file: a
    /// cut line, an id that is not a UUID, which the relay never writes) are set aside in
    /// `audit-rejected.jsonl` as they were, and the rest of the spool is stored.
    @Test func unreadableSpoolLinesAreSetAsideAndTheRestIsStored() throws {
        let event = try AuditRepository.event(.appConnected, at: .now(), actor: "relay", deviceID: "d1", tokenID: 7, remoteAddress: "::1",
                                               details: .object([("reason", .string("x"))]))
        let line = try SpoolLine.event(event).line()
        #expect(SpoolLine(line: line) == .event(event))
        let damagedID = line.replacingOccurrences(of: event.id.description, with: "0190-not-a-uuid")
        let cut = String(line.prefix(40))
        #expect(damagedID != line && SpoolLine(line: damagedID) == nil && SpoolLine(line: cut) == nil)

        let database = try TestDatabase()
        defer { database.drop() }
        let spool = try TestEnvironment.scratchDirectory("audit-unreadable-\(UUID().uuidString)")
        try (damagedID + "\n" + line + "\n" + cut + "\n").write(toFile: spool + "/audit-spool.jsonl", atomically: true, encoding: .utf8)
        let writer = AuditWriter(conninfo: database.url, spoolDirectory: spool)
        writer.start()
        let deadline = Date().addingTimeInterval(10)
        while writer.stats.written < 1, Date() < deadline { usleep(20_000) }
        writer.stop()
        #expect(try AuditRepository(try database.connect()).query().map(\.event.id) == [event.id])
        #expect(try String(contentsOfFile: spool + "/audit-rejected.jsonl", encoding: .utf8) == damagedID + "\n" + cut + "\n")
        #expect(!FileManager.default.fileExists(atPath: spool + "/audit-spool.jsonl"))
    }

    /// An event the database refuses for good (jsonb takes no `\u0000`) would otherwise hold
    /// the queue: it is moved to `audit-rejected.jsonl` and counted, and the rest of its batch,
    /// and what follows, is stored. The same holds for a spool file being replayed.
    @Test func aRefusedEventIsSetAsideAndTheRestIsStored() throws {
        let database = try TestDatabase()
        defer { database.drop() }
        let spool = try TestEnvironment.scratchDirectory("audit-refused-\(UUID().uuidString)")
        func event(_ device: String, refused: Bool = false) throws -> AuditEvent {
            try AuditRepository.event(.appConnected, at: .now(), actor: "relay", deviceID: device,
                                      details: refused ? .raw(#"{"reason":"a\u0000b"}"#) : .object([]))
        }
        let spooledGood = try event("spooled-good"), spooledBad = try event("spooled-bad", refused: true)
        let offline = AuditWriter(conninfo: "host=/nonexistent-wimz port=5432 user=postgres dbname=x", spoolDirectory: spool)
        offline.start()
        offline.record(spooledGood)
        offline.record(spooledBad)
        offline.stop()
        #expect(offline.stats.spooled == 2)

        let writer = AuditWriter(conninfo: database.url, spoolDirectory: spool)
        writer.start()
        defer { writer.stop() }
        let events = [try event("before"), try event("bad", refused: true), try event("after")]
        events.forEach(writer.record)
        func waitFor(written: Int, rejected: Int) {
            let deadline = Date().addingTimeInterval(10)
            while (writer.stats.written, writer.stats.rejected) != (written, rejected), Date() < deadline { usleep(20_000) }
        }
        waitFor(written: 3, rejected: 2)
        #expect(writer.stats.written == 3 && writer.stats.rejected == 2)
        let later = try event("later")
        writer.record(later)
        waitFor(written: 4, rejected: 2)

        let stored = try AuditRepository(try database.connect()).query().map(\.event.id)
        #expect(Set(stored) == Set([spooledGood.id, events[0].id, events[2].id, later.id]) && stored.count == 4)
        #expect(!FileManager.default.fileExists(atPath: spool + "/audit-spool.jsonl"))
        let rejected = try String(contentsOfFile: spool + "/audit-rejected.jsonl", encoding: .utf8)
            .split(separator: "\n").compactMap { SpoolLine(line: $0) }
        let rejectedIDs = rejected.compactMap { record -> UUIDValue? in if case .event(let e) = record { e.id } else { nil } }
        #expect(rejectedIDs == [spooledBad.id, events[1].id])
    }
}
