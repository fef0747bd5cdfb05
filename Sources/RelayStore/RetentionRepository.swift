import RelayCore

/// Pruning of the tables that grow with every event (docs/operations.md "Retention"), a batch at
/// a time: each batch is one short statement, so the audit writer's inserts and every other
/// writer never queue behind a long delete, and vacuum keeps up. Batches rather than partitions:
/// docs/performance.md "Session 24: retention at 10 million rows" has the measurement.
public struct RetentionRepository {
    let db: PGConnection

    public init(_ db: PGConnection) { self.db = db }

    /// A table that grows per event, and which of its rows are older than the retention.
    public enum Table: String, CaseIterable, Sendable {
        /// Every audited event, by its time.
        case auditLog = "audit_log"
        /// Every TURN credential, once it has expired (a two-day credential is not pruned while valid).
        case turnIssuances = "turn_issuances"
        /// Pairing codes and invitations, used or not, by their expiry.
        case pairingCodes = "pairing_codes"
        /// Removals' TURN cuts, once done.
        case turnCuts = "turn_cuts"

        /// The condition on rows older than `days` days, each served by an index (a BRIN on time
        /// for the two large tables, which arrive in time order).
        func rows(olderThanDays days: Int) -> PGQuery {
            let cutoff: PGQuery = "now() - make_interval(days => \(days)::int)"
            switch self {
            case .auditLog: return "at < \(cutoff)"
            case .turnIssuances: return "issued_at < \(cutoff) AND expires_at < \(cutoff)"
            case .pairingCodes: return "expires_at < \(cutoff)"
            case .turnCuts: return "done_at < \(cutoff)"
            }
        }
    }

    /// Deletes up to `limit` rows of `table` older than `days` days, in one statement; how many.
    public func pruneBatch(_ table: Table, olderThanDays days: Int, limit: Int) throws -> Int {
        let batch: PGQuery = """
            DELETE FROM \(identifier: table.rawValue) WHERE ctid = ANY(ARRAY(
                SELECT ctid FROM \(identifier: table.rawValue) WHERE \(table.rows(olderThanDays: days)) LIMIT \(limit)))
            """
        guard table == .auditLog else { return try db.execute(batch).affected }
        // The audit log is append-only (migrations/0011) except for a transaction that says it prunes.
        return try db.transaction {
            try db.execute("SET LOCAL wimz.audit_prune = 'on'")
            return try db.execute(batch).affected
        }
    }

    /// Key of the advisory lock that lets one node of a cluster prune at a time.
    static let lockKey: Int64 = 0x77_69_6D_7A_72_65_74  // "wimzret"

    /// Takes the cluster's pruning lock for this connection's session, if no other holds it.
    public func tryLock() throws -> Bool {
        try db.execute("SELECT pg_try_advisory_lock(\(RetentionRepository.lockKey)) AS locked").single().bool("locked")
    }

    /// Gives the pruning lock back.
    public func unlock() throws {
        _ = try db.execute("SELECT pg_advisory_unlock(\(RetentionRepository.lockKey))")
    }

    /// One table's footprint, for `/metrics`.
    public struct TableSize: Sendable, Equatable {
        public var table: String
        /// Heap, indexes and TOAST.
        public var bytes: Int64
        /// The planner's estimate (kept by autovacuum and ANALYZE): no count(*) over millions of rows.
        public var rows: Int64
    }

    /// Every table of the relay's schema with its size.
    public func tableSizes() throws -> [TableSize] {
        try db.execute(
            """
            SELECT c.relname,
                   CASE WHEN c.relkind = 'p' THEN (SELECT coalesce(sum(pg_total_relation_size(i.inhrelid)), 0) FROM pg_inherits i
                                                   WHERE i.inhparent = c.oid)
                        ELSE pg_total_relation_size(c.oid) END::bigint AS bytes,
                   CASE WHEN c.relkind = 'p' THEN (SELECT coalesce(sum(GREATEST(p.reltuples, 0)), 0) FROM pg_inherits i
                                                   JOIN pg_class p ON p.oid = i.inhrelid WHERE i.inhparent = c.oid)
                        ELSE GREATEST(c.reltuples, 0) END::bigint AS estimated_rows
            FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
            -- A partitioned table counts as one, its partitions summed (a day's partition is not a table of its own here).
            WHERE c.relkind IN ('r', 'p') AND NOT c.relispartition AND n.nspname = current_schema()
            ORDER BY c.relname
            """).records.map { row in
            TableSize(table: try row.string("relname"), bytes: try row.int64("bytes"), rows: try row.int64("estimated_rows"))
        }
    }
}
