import RelayCore
import RelayCrypto

/// The append-only audit log.
public struct AuditRepository {
    let db: PGConnection

    public init(_ db: PGConnection) { self.db = db }

    /// Most rows one INSERT carries (one transaction's worth for the writer).
    public static let maxBatch = 500

    /// A new event at `at` (the relay's clock: `AuditTrail` passes it, the repositories their
    /// connection's, `PGConnection.clock`) and a fresh time-ordered id (`Crypto.uuidV7`).
    public static func event(_ kind: AuditKind, at: UnixTime, actor: String, deviceID: String? = nil, tokenID: Int64? = nil,
                             remoteAddress: String? = nil, details: JSONValue = .object([])) throws -> AuditEvent {
        return AuditEvent(id: try Crypto.uuidV7(unixMilliseconds: UInt64(max(0, at.microseconds / 1000))), at: at,
                          kind: kind, actor: actor, deviceID: deviceID, tokenID: tokenID, remoteAddress: remoteAddress,
                          details: details)
    }

    /// Inserts events; ids already stored are skipped, so replaying a batch is harmless.
    /// `fresh`: none of them can be stored yet (the writer's first attempt at events it made),
    /// so the rows go in without the conflict check, which costs an index probe a row.
    /// Returns how many rows were new.
    @discardableResult
    public func append(_ events: [AuditEvent], fresh: Bool = false) throws -> Int {
        var inserted = 0
        var start = 0
        while start < events.count {
            let batch = events[start..<min(start + AuditRepository.maxBatch, events.count)]
            let conflict: PGQuery = fresh ? "" : "ON CONFLICT (event_id) DO NOTHING"
            inserted += try db.executePrepared(
                """
                INSERT INTO audit_log (event_id, at, event, actor, device_id, token_id, remote_addr, details)
                SELECT * FROM unnest(\(batch.map(\.id))::uuid[], \(batch.map(\.at))::timestamptz[], \(batch.map(\.kind.rawValue))::text[],
                                     \(batch.map(\.actor))::text[], \(batch.map(\.deviceID))::text[], \(batch.map(\.tokenID))::bigint[],
                                     \(batch.map(\.remoteAddress))::text[], \(batch.map(\.details))::jsonb[])
                \(conflict)
                """).affected
            start += batch.count
        }
        return inserted
    }

    /// A stored audit entry as read back.
    public struct Entry: Sendable {
        public var sequence: Int64
        public var event: AuditEvent
        /// The details object as stored (JSON text).
        public var detailsJSON: String
    }

    /// Entries filtered by device and time range, oldest first, `limit` at most, after
    /// `afterSequence` (keyset paging).
    public func query(deviceID: String? = nil, from: UnixTime? = nil, to: UnixTime? = nil, kind: AuditKind? = nil,
                      afterSequence: Int64 = 0, limit: Int = 100) throws -> [Entry] {
        let rows = try db.execute(
            """
            SELECT id, event_id, at, event, actor, device_id, token_id, remote_addr, details::text AS details
            FROM audit_log
            WHERE (\(deviceID)::text IS NULL OR device_id = \(deviceID))
              AND (\(from)::timestamptz IS NULL OR at >= \(from)::timestamptz)
              AND (\(to)::timestamptz IS NULL OR at < \(to)::timestamptz)
              AND (\(kind)::text IS NULL OR event = \(kind))
              AND id > \(afterSequence)
            ORDER BY id LIMIT \(limit)
            """)
        return try rows.records.compactMap { row in
            // An event this build does not know (written by a newer one) is left out, as it always was.
            guard let kind = AuditKind(rawValue: try row.string("event")),
                  let id = UUIDValue(try row.string("event_id")) else { return nil }
            let details = try row.optionalString("details") ?? "{}"
            return Entry(sequence: try row.int64("id"),
                         event: AuditEvent(id: id, at: try row.time("at"), kind: kind, actor: try row.string("actor"),
                                           deviceID: try row.optionalString("device_id"), tokenID: try row.optionalInt64("token_id"),
                                           remoteAddress: try row.optionalString("remote_addr"), details: .raw(details)),
                         detailsJSON: details)
        }
    }
}
