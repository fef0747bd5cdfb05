import Foundation
import Testing
import RelayCore
import RelayTestSupport
@testable import RelayStore

/// Retention (migrations/0011, docs/operations.md "Retention") against a real PostgreSQL.
@Suite struct RetentionRepositoryTests {
    /// A device with an app token, and rows of every pruned table on both sides of 30 days.
    func seeded() throws -> (TestDatabase, PGConnection) {
        let database = try TestDatabase()
        let db = try database.connect()
        try db.executeScript(
            """
            INSERT INTO devices (id) VALUES ('dev1');
            INSERT INTO tokens (device_id, role, digest) SELECT 'dev1', 'app', sha256(i::text::bytea) FROM generate_series(1, 4) i;
            INSERT INTO audit_log (event_id, at, event, actor)
                SELECT gen_random_uuid(), now() - make_interval(days => d), 'old_' || d, 't'
                FROM generate_series(31, 35) d;
            INSERT INTO audit_log (event_id, at, event, actor)
                SELECT gen_random_uuid(), now() - make_interval(days => d), 'recent_' || d, 't'
                FROM generate_series(0, 2) d;
            -- Expired 31+ days ago (pruned); issued 40 days ago but valid until tomorrow (kept); recent (kept).
            INSERT INTO turn_issuances (device_id, role, user_id, username, issued_at, expires_at, via)
                SELECT 'dev1', 'app', 'u', 'n' || d, now() - make_interval(days => d + 1), now() - make_interval(days => d), 'http'
                FROM generate_series(31, 33) d;
            INSERT INTO turn_issuances (device_id, role, user_id, username, issued_at, expires_at, via) VALUES
                ('dev1', 'app', 'u', 'long', now() - interval '40 days', now() + interval '1 day', 'http'),
                ('dev1', 'app', 'u', 'new', now(), now() + interval '1 day', 'http');
            INSERT INTO pairing_codes (device_id, digest, expires_at, created_by) VALUES
                ('dev1', sha256('a'), now() - interval '31 days', 't'),
                ('dev1', sha256('b'), now() - interval '29 days', 't'),
                ('dev1', sha256('c'), now() + interval '10 minutes', 't');
            -- Done 31 days ago (pruned); done yesterday, and never done (kept).
            INSERT INTO turn_cuts (token_id, device_id, reason, requested_at, done_at)
                SELECT id, 'dev1', 'revoked', now() - interval '40 days',
                       CASE id % 3 WHEN 1 THEN now() - interval '31 days' WHEN 2 THEN now() - interval '1 day' END
                FROM tokens WHERE id <= 3;
            """)
        return (database, db)
    }

    func count(_ db: PGConnection, _ table: String, _ condition: String = "true") throws -> Int {
        Int(try db.execute(PGQuery(unsafeSQL: "SELECT count(*) FROM \(table) WHERE \(condition)")).first?[0] ?? "") ?? -1
    }

    @Test func batchesDeleteOnlyRowsPastTheRetention() throws {
        let (database, db) = try seeded()
        defer { database.drop() }
        let retention = RetentionRepository(db)
        // Two rows a batch: the five old audit rows take three batches, the last one short.
        #expect(try retention.pruneBatch(.auditLog, olderThanDays: 30, limit: 2) == 2)
        #expect(try retention.pruneBatch(.auditLog, olderThanDays: 30, limit: 2) == 2)
        #expect(try retention.pruneBatch(.auditLog, olderThanDays: 30, limit: 2) == 1)
        #expect(try retention.pruneBatch(.auditLog, olderThanDays: 30, limit: 2) == 0)
        #expect(try count(db, "audit_log") == 3)
        #expect(try count(db, "audit_log", "event LIKE 'old_%'") == 0)

        #expect(try retention.pruneBatch(.turnIssuances, olderThanDays: 30, limit: 100) == 3)
        #expect(try db.execute("SELECT username FROM turn_issuances ORDER BY username").rows.map { $0[0] } == ["long", "new"])
        #expect(try retention.pruneBatch(.pairingCodes, olderThanDays: 30, limit: 100) == 1)
        #expect(try count(db, "pairing_codes") == 2)
        #expect(try retention.pruneBatch(.turnCuts, olderThanDays: 30, limit: 100) == 1)
        #expect(try count(db, "turn_cuts") == 2)
        #expect(try count(db, "turn_cuts", "done_at IS NULL") == 1)
    }

    /// Pruning is the one way out of the audit log: an ordinary DELETE, UPDATE or TRUNCATE still fails.
    @Test func theAuditLogStaysAppendOnlyOutsideThePruner() throws {
        let (database, db) = try seeded()
        defer { database.drop() }
        for statement in ["DELETE FROM audit_log WHERE at < now() - interval '30 days'", "UPDATE audit_log SET actor = 'x'",
                          "TRUNCATE audit_log"] {
            let refused = #expect(throws: StoreError.self) { try db.execute(PGQuery(unsafeSQL: statement)) }
            #expect(refused?.description.contains("append-only") == true, "\(statement)")
        }
        // The pruner's setting lasts for its own transaction only.
        #expect(try RetentionRepository(db).pruneBatch(.auditLog, olderThanDays: 30, limit: 10) == 5)
        #expect(throws: StoreError.self) { try db.execute("DELETE FROM audit_log") }
        #expect(try count(db, "audit_log") == 3)
    }

    /// One node of a cluster prunes at a time: the lock is the session's until it is given back
    /// (or the connection ends).
    @Test func oneConnectionHoldsThePruningLock() throws {
        let database = try TestDatabase()
        defer { database.drop() }
        let first = RetentionRepository(try database.connect())
        #expect(try first.tryLock())
        do {
            let second = RetentionRepository(try database.connect())
            #expect(try second.tryLock() == false)
            try first.unlock()
            #expect(try second.tryLock())
            #expect(try first.tryLock() == false)
        }
        // A node that dies gives the lock up with its connection.
        var taken = false
        for _ in 0..<50 where !taken {
            taken = try first.tryLock()
            if !taken { usleep(20_000) }
        }
        #expect(taken)
    }

    @Test func tableSizesCoverEveryTable() throws {
        let (database, db) = try seeded()
        defer { database.drop() }
        try db.execute("ANALYZE audit_log")
        let sizes = try RetentionRepository(db).tableSizes()
        let audit = try #require(sizes.first { $0.table == "audit_log" })
        #expect(audit.bytes > 0)
        #expect(audit.rows == 8)
        for table in RetentionRepository.Table.allCases {
            #expect(sizes.contains { $0.table == table.rawValue })
        }
        #expect(sizes.contains { $0.table == "tokens" } && sizes.contains { $0.table == "devices" })
    }
}
