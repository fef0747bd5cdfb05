import RelayCore
import RelayCrypto

/// TURN secrets (rotation) and issuances.
public struct TurnRepository {
    let db: PGConnection

    public init(_ db: PGConnection) { self.db = db }

    static let columns: PGQuery = "id, realm, value, created_at"

    /// Secrets of a realm, newest first (the first one signs).
    public func secrets(realm: String) throws -> [TurnSecret] {
        try db.execute("SELECT \(TurnRepository.columns) FROM turn_secret WHERE realm = \(realm) ORDER BY created_at DESC, id DESC")
            .records.map(TurnRepository.decode)
    }

    /// Adds a secret (random 32 bytes, base64url, when `value` is nil); it becomes the signing one.
    @discardableResult
    public func add(realm: String, value: String?, actor: String, kind: AuditKind = .turnSecretAdded) throws -> TurnSecret {
        let secret = try value ?? Base64.encodeURLSafe(Crypto.randomBytes(32))
        guard secret.count >= 16 else { throw StoreError(.conflict, "a TURN secret must have at least 16 characters") }
        return try db.transaction {
            let row: PGRows
            do {
                row = try db.execute("INSERT INTO turn_secret (realm, value) VALUES (\(realm), \(secret)) RETURNING \(TurnRepository.columns)")
            } catch let error as StoreError where error.isUniqueViolation {
                throw StoreError(.conflict, "that secret already exists in realm \(realm)")
            }
            let stored = try TurnRepository.decode(row.single())
            try AuditRepository(db).append([
                AuditRepository.event(kind, at: db.clock.wall(),
                                      actor: actor, details: .object([("realm", .string(realm)), ("secret_id", .int(stored.id))])),
            ])
            return stored
        }
    }

    /// Deletes a secret so coturn stops accepting it. Refused while credentials it signed are
    /// still valid, unless `force`.
    public func retire(id: Int64, force: Bool, actor: String) throws -> TurnSecret {
        let now = db.clock.wall()
        return try db.transaction {
            guard let row = try db.execute("SELECT \(TurnRepository.columns) FROM turn_secret WHERE id = \(id) FOR UPDATE").firstRecord
            else { throw StoreError(.notFound, "unknown TURN secret \(id)") }
            let secret = try TurnRepository.decode(row)
            let live = try db.execute(
                """
                SELECT count(*) AS live, max(expires_at) AS until FROM turn_issuances
                WHERE secret_id = \(id) AND expires_at > \(now)::timestamptz
                """).single()
            let n = try live.int("live")
            if !force, n > 0 {
                throw StoreError(.conflict, "secret \(id) signed \(n) credentials valid until \(try live.optionalTime("until")?.iso8601 ?? "?"); "
                    + "retire it after that, or pass --force")
            }
            try db.execute("DELETE FROM turn_secret WHERE id = \(id)")
            try AuditRepository(db).append([
                AuditRepository.event(.turnSecretRetired, at: now, actor: actor,
                                      details: .object([("realm", .string(secret.realm)), ("secret_id", .int(id)),
                                                        ("forced", .bool(force))])),
            ])
            return secret
        }
    }

    /// Stores issuances (batched by the relay).
    public func record(_ issuances: [TurnIssuance]) throws {
        for chunk in stride(from: 0, to: issuances.count, by: 500).map({ Array(issuances[$0..<min($0 + 500, issuances.count)]) }) {
            // One statement text whatever the chunk's size, its columns as arrays (as the audit log's).
            try db.executePrepared(
                """
                INSERT INTO turn_issuances (device_id, token_id, role, user_id, username, secret_id, issued_at, expires_at,
                                            client_addr, via, issuance_id)
                SELECT d, t, r, u, n, s, i, e, c, v, x::uuid
                FROM unnest(\(chunk.map(\.deviceID))::text[], \(chunk.map(\.tokenID))::bigint[], \(chunk.map(\.role.rawValue))::text[],
                            \(chunk.map(\.userID))::text[], \(chunk.map(\.username))::text[], \(chunk.map(\.secretID))::bigint[],
                            \(chunk.map(\.issuedAt))::timestamptz[], \(chunk.map(\.expiresAt))::timestamptz[],
                            \(chunk.map(\.clientAddress))::text[], \(chunk.map(\.via))::text[], \(chunk.map(\.id))::text[])
                     AS a (d, t, r, u, n, s, i, e, c, v, x)
                ON CONFLICT (issuance_id) DO NOTHING
                """)
        }
    }

    static func decode(_ row: PGRow) throws -> TurnSecret {
        TurnSecret(id: try row.int64("id"), realm: try row.string("realm"), value: try row.string("value"),
                   createdAt: try row.time("created_at"))
    }
}
