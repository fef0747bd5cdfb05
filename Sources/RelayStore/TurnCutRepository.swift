import RelayCore

/// TURN sessions to cut (docs/protocol.md v1.3 "Removal cuts the video"), as rows of
/// `turn_cuts` (migrations/0010): a revoked app token's row is written by the store's trigger in
/// the revoking transaction; an expired one's by `recordExpiries`. Any node's cutter claims due
/// rows under a lease, so each removal is cut once in a cluster and a crashed claimer's rows
/// come round again.
public struct TurnCutRepository {
    let db: PGConnection

    public init(_ db: PGConnection) { self.db = db }

    /// A claimed cut: whose sessions, which usernames, and the servers already done.
    public struct Cut: Sendable, Equatable {
        public var id: Int64
        public var tokenID: Int64
        public var deviceID: String
        public var reason: String
        public var serversDone: [String]
        public var attempts: Int
        /// Seconds since the removal.
        public var age: Double
        /// The TURN REST usernames issued to the token whose allocations may still live.
        public var usernames: [String]
    }

    /// Rows for app tokens that expired in the last `window` seconds and have none yet, each
    /// audited `member_expired` (once: the row is the mark). Returns how many.
    @discardableResult
    public func recordExpiries(window: Int) throws -> Int {
        try db.transaction {
            let rows = try db.execute(
                """
                INSERT INTO turn_cuts (token_id, device_id, reason)
                SELECT t.id, t.device_id, 'expired' FROM tokens t
                WHERE t.role = 'app' AND t.revoked_at IS NULL AND t.expires_at <= now()
                  AND t.expires_at > now() - make_interval(secs => \(window)::bigint)
                  AND NOT EXISTS (SELECT 1 FROM turn_cuts c WHERE c.token_id = t.id)
                ON CONFLICT (token_id) DO NOTHING
                RETURNING token_id, device_id
                """)
            let expired = rows.records
            guard !expired.isEmpty else { return 0 }
            try AuditRepository(db).append(try expired.map { row in
                try AuditRepository.event(.memberExpired, at: db.clock.wall(), actor: "relay", deviceID: try row.string("device_id"),
                                          tokenID: try row.int64("token_id"), details: .object([("by", "expiry")]))
            })
            return expired.count
        }
    }

    /// Claims up to `limit` due cuts for `node` for `lease` seconds, with the usernames issued to
    /// each token whose credential expired less than `allocationLifetime` seconds ago or not at all.
    public func claim(node: String, limit: Int = 20, lease: Int = 30, allocationLifetime: Int) throws -> [Cut] {
        let claimed = try db.execute(
            """
            UPDATE turn_cuts c SET claimed_by = \(node), claimed_until = now() + make_interval(secs => \(lease)::bigint),
                                   attempts = c.attempts + 1
            WHERE c.id IN (SELECT id FROM turn_cuts WHERE done_at IS NULL AND next_attempt_at <= now()
                             AND (claimed_until IS NULL OR claimed_until < now())
                           ORDER BY id LIMIT \(limit) FOR UPDATE SKIP LOCKED)
            RETURNING c.id, c.token_id, c.device_id, c.reason, array_to_string(c.servers_done, ' ') AS servers_done, c.attempts,
                      extract(epoch FROM now() - c.requested_at)::float8 AS age
            """)
        return try claimed.records.map { row in
            let token = try row.int64("token_id")
            let names = try db.execute(
                """
                SELECT DISTINCT username FROM turn_issuances
                WHERE token_id = \(token) AND expires_at > now() - make_interval(secs => \(allocationLifetime)::bigint) ORDER BY username
                """).records.map { try $0.string("username") }
            return Cut(id: try row.int64("id"), tokenID: token, deviceID: try row.string("device_id"), reason: try row.string("reason"),
                       serversDone: (try row.optionalString("servers_done") ?? "").split(separator: " ").map(String.init),
                       attempts: try row.int("attempts"), age: try row.double("age"), usernames: names)
        }
    }

    /// Records what a claimed cut achieved: `serversDone` now, sessions cancelled this time, and —
    /// when `finished` — done (audited `turn_sessions_cut`); otherwise retried after `retryIn` seconds.
    public func finish(_ cut: Cut, serversDone: [String], sessionsCut: Int, finished: Bool, error: String?,
                       retryIn: Int) throws {
        try db.transaction {
            let rows = try db.execute(
                """
                UPDATE turn_cuts SET servers_done = \(serversDone)::text[], sessions_cut = sessions_cut + \(sessionsCut), last_error = \(error),
                       claimed_by = NULL, claimed_until = NULL,
                       done_at = CASE WHEN \(finished)::boolean THEN now() END,
                       next_attempt_at = now() + make_interval(secs => \(retryIn)::bigint)
                WHERE id = \(cut.id) RETURNING sessions_cut
                """)
            guard finished else { return }
            let total = try rows.single().int64("sessions_cut")
            try AuditRepository(db).append([
                AuditRepository.event(.turnSessionsCut, at: db.clock.wall(),
                                      actor: "relay", deviceID: cut.deviceID, tokenID: cut.tokenID,
                                      details: .object([("reason", .string(cut.reason)), ("sessions", .int(total)),
                                                        ("servers", .array(serversDone.map(JSONValue.string))),
                                                        ("usernames", .int(Int64(cut.usernames.count))),
                                                        ("attempts", .int(Int64(cut.attempts)))])),
            ])
        }
    }

    /// Cuts not done yet (for `/metrics` and tests).
    public func pendingCount() throws -> Int {
        try db.execute("SELECT count(*) AS pending FROM turn_cuts WHERE done_at IS NULL").single().int("pending")
    }
}
