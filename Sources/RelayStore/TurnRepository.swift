import RelayCore
import RelayCrypto

/// TURN secrets (rotation) and issuances.
public struct TurnRepository {
    let db: PGConnection

    public init(_ db: PGConnection) { self.db = db }

    static let columns = "id, realm, value, created_at"

    /// Secrets of a realm, newest first (the first one signs).
    public func secrets(realm: String) throws -> [TurnSecret] {
        try db.execute("SELECT \(TurnRepository.columns) FROM turn_secret WHERE realm = $1 ORDER BY created_at DESC, id DESC",
                       [realm]).records.map(TurnRepository.decode)
    }

    /// Adds a secret (random 32 bytes, base64url, when `value` is nil); it becomes the signing one.
    @discardableResult
    public func add(realm: String, value: String?, actor: String, kind: AuditKind = .turnSecretAdded) throws -> TurnSecret {
        let secret = try value ?? Base64.encodeURLSafe(Crypto.randomBytes(32))
        guard secret.count >= 16 else { throw StoreError(.conflict, "a TURN secret must have at least 16 characters") }
        return try db.transaction {
            let row: PGRows
            do {
                row = try db.execute("INSERT INTO turn_secret (realm, value) VALUES ($1, $2) RETURNING \(TurnRepository.columns)",
                                     [realm, secret])
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
            guard let row = try db.execute("SELECT \(TurnRepository.columns) FROM turn_secret WHERE id = $1 FOR UPDATE",
                                           [String(id)]).firstRecord
            else { throw StoreError(.conflict, "unknown TURN secret \(id)") }
            let secret = try TurnRepository.decode(row)
            let live = try db.execute(
                """
                SELECT count(*) AS live, max(expires_at) AS until FROM turn_issuances
                WHERE secret_id = $1 AND expires_at > $2::timestamptz
                """, [String(id), PGValue.timeText(now)]).single()
            let n = try live.int("live")
            if !force, n > 0 {
                throw StoreError(.conflict, "secret \(id) signed \(n) credentials valid until \(try live.optionalTime("until")?.iso8601 ?? "?"); "
                    + "retire it after that, or pass --force")
            }
            try db.execute("DELETE FROM turn_secret WHERE id = $1", [String(id)])
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
            var values: [String] = []
            var params: [String?] = []
            for i in chunk {
                let n = params.count
                values.append("($\(n + 1), $\(n + 2)::bigint, $\(n + 3), $\(n + 4), $\(n + 5), $\(n + 6)::bigint, "
                    + "$\(n + 7)::timestamptz, $\(n + 8)::timestamptz, $\(n + 9), $\(n + 10), $\(n + 11)::uuid)")
                params += [i.deviceID.rawValue, i.tokenID.map { String($0) }, i.role.rawValue, i.userID, i.username,
                           i.secretID.map { String($0) }, PGValue.timeText(i.issuedAt), PGValue.timeText(i.expiresAt),
                           i.clientAddress, i.via, i.id]
            }
            try db.execute("INSERT INTO turn_issuances (device_id, token_id, role, user_id, username, secret_id, issued_at, "
                + "expires_at, client_addr, via, issuance_id) VALUES " + values.joined(separator: ", ")
                + " ON CONFLICT (issuance_id) DO NOTHING", params)
        }
    }

    static func decode(_ row: PGRow) throws -> TurnSecret {
        TurnSecret(id: try row.int64("id"), realm: try row.string("realm"), value: try row.string("value"),
                   createdAt: try row.time("created_at"))
    }
}
