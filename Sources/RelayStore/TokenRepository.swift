import RelayCore
import RelayCrypto

/// A token as just issued: the only moment its secret exists outside the holder.
public struct IssuedToken: Sendable {
    public var record: TokenRecord
    public var secret: String
}

/// Bearer tokens in the store (digests only).
public struct TokenRepository {
    let db: PGConnection

    public init(_ db: PGConnection) { self.db = db }

    /// A token's columns, `t` being the token. Its last use is in a table of its own (migration
    /// 0016); `tokens.last_used_at` is what releases before it wrote, during a roll or after a roll back.
    static let columns: PGQuery = """
        t.id, t.device_id, t.role, t.label, t.digest, t.created_at, t.expires_at, t.revoked_at, \
        GREATEST(t.last_used_at, (SELECT u.last_used_at FROM token_uses u WHERE u.token_id = t.id)) AS last_used_at, \
        t.access, t.control
        """

    /// Issues a token for an existing, enabled device. `expiresIn` is in seconds; `until` an
    /// absolute end (a member's, docs/protocol.md v1.3) — at most one of them. `rights` only for app
    /// tokens (robots are owners).
    public func issue(device: DeviceID, role: Role, label: String, expiresIn: Int64?, until: UnixTime? = nil,
                      rights: MemberRights = MemberRights(access: .owner, control: false), actor: String) throws -> IssuedToken {
        if let expiresIn, expiresIn <= 0 { throw StoreError(.conflict, "--expires-in must be a positive number of seconds") }
        if expiresIn != nil, until != nil { throw StoreError(.conflict, "give --expires-in or --until, not both") }
        if role == .robot, rights.access != .owner { throw StoreError(.conflict, "robot tokens have no access level") }
        let control = rights.access == .guest && rights.control
        let secret = try BearerToken.generate(prefix: role.tokenPrefix)
        return try db.transaction {
            guard let target = try DeviceRepository(db).lock(device, .share) else {
                throw StoreError(.notFound, "unknown device \(device)")
            }
            if target.isDisabled {
                throw StoreError(.conflict, "device \(device) is disabled; enable it before issuing tokens")
            }
            let rows = try db.execute(
                """
                INSERT INTO tokens AS t (device_id, role, digest, label, expires_at, access, control)
                VALUES (\(device), \(role), \(BearerToken.digest(secret))::bytea, \(label),
                        CASE WHEN \(expiresIn)::bigint IS NOT NULL THEN now() + make_interval(secs => \(expiresIn)::bigint)
                             ELSE \(until)::timestamptz END, \(rights.access), \(control))
                RETURNING \(TokenRepository.columns)
                """)
            let record = try TokenRepository.decode(rows.single())
            var details: [(String, JSONValue)] = [("role", .string(role.rawValue)), ("label", .string(label)),
                                                  ("expires_at", .optional(record.expiresAt?.iso8601))]
            if role == .app { details += [("access", .string(record.access.rawValue)), ("control", .bool(record.rights.mayCommand))] }
            try AuditRepository(db).append([
                AuditRepository.event(.tokenIssued, at: db.clock.wall(), actor: actor, deviceID: device.rawValue, tokenID: record.id,
                                      details: .object(details)),
            ])
            return IssuedToken(record: record, secret: secret)
        }
    }

    /// Tokens, newest first; never their secrets.
    public func list(device: DeviceID? = nil) throws -> [TokenRecord] {
        try db.execute(
            "SELECT \(TokenRepository.columns) FROM tokens t WHERE (\(device)::text IS NULL OR t.device_id = \(device)) ORDER BY t.id"
        ).records.map(TokenRepository.decode)
    }

    /// Revokes a token. Revoking an already revoked token changes nothing and is not audited.
    @discardableResult
    public func revoke(id: Int64, actor: String) throws -> (token: TokenRecord, changed: Bool) {
        try db.transaction {
            guard let row = try db.execute("SELECT \(TokenRepository.columns) FROM tokens t WHERE t.id = \(id) FOR UPDATE").firstRecord
            else { throw StoreError(.notFound, "unknown token \(id)") }
            let current = try TokenRepository.decode(row)
            guard current.revokedAt == nil else { return (current, false) }
            let updated = try db.execute("UPDATE tokens t SET revoked_at = now() WHERE t.id = \(id) RETURNING \(TokenRepository.columns)")
            try AuditRepository(db).append([
                AuditRepository.event(.tokenRevoked, at: db.clock.wall(),
                                      actor: actor, deviceID: current.deviceID.rawValue, tokenID: id),
            ])
            return (try TokenRepository.decode(updated.single()), true)
        }
    }

    /// Looks a presented secret up by digest and applies every rule except device/role
    /// matching (the caller knows what it expects); at `now`, by default the connection's clock.
    public func verify(secret: String, at now: UnixTime? = nil) throws -> Result<CredentialEntry, AuthFailure> {
        guard let entry = try credential(digest: BearerToken.digest(secret)) else { return .failure(.unknownToken) }
        return CredentialRules.check(entry, at: now ?? db.clock.wall())
    }

    /// The tokens with these digests, with their devices' states, whatever their state: the
    /// relay's batched lookup of presented tokens it does not hold (one statement for many). Only
    /// what a token's checks read (`TokenCredential`) — a cold storm reads one row a handshake, and
    /// each column is text to parse. Every column it reads is in the digest's index (migration
    /// 0016): no heap page to read.
    public func credentials(digests: [[UInt8]]) throws -> [CredentialEntry] {
        guard !digests.isEmpty else { return [] }
        // Prepared once per connection, the digests in binary: no text array to parse, no hex to
        // decode, no plan per batch — the storm's lookups are this statement again and again.
        return try db.executePrepared(Self.lookup(byDigests: digests)).records.compactMap { row in
            guard let digest = DigestKey(exactly: try row.bytes("digest")) else { return nil }  // no token's
            let token = TokenCredential(id: try row.int64("id"), deviceID: try row.deviceID("device_id"), role: try row.value("role"),
                                        digest: digest, expiresAt: try row.optionalTime("expires_at"),
                                        revokedAt: try row.optionalTime("revoked_at"), access: try row.value("access"),
                                        control: try row.bool("control"))
            return CredentialEntry(token: token, deviceDisabled: try row.bool("device_disabled"))
        }
    }

    /// `credentials(digests:)`'s statement: it reads only columns of the digest's index.
    static func lookup(byDigests digests: [[UInt8]]) -> PGQuery {
        """
        SELECT t.id, t.device_id, t.role, t.digest, t.expires_at, t.revoked_at, t.access, t.control,
               \(TokenRepository.deviceDisabled)
        FROM tokens t WHERE t.digest = ANY (\(digests)::bytea[])
        """
    }

    /// The tokens with these ids (those that still exist), with their devices' states: what the
    /// relay holds, read again after its listener reconnected.
    public func credentials(ids: [Int64]) throws -> [CredentialEntry] {
        guard !ids.isEmpty else { return [] }
        return try credentials(
            "SELECT \(TokenRepository.columns), \(TokenRepository.deviceDisabled) FROM tokens t WHERE t.id = ANY (\(ids)::bigint[])")
    }

    /// One token with its device's state, whatever its state.
    public func credential(id: Int64) throws -> CredentialEntry? {
        try credentials("SELECT \(TokenRepository.columns), \(TokenRepository.deviceDisabled) FROM tokens t WHERE t.id = \(id)")
            .first
    }

    public func credential(digest: [UInt8]) throws -> CredentialEntry? {
        try credentials(
            "SELECT \(TokenRepository.columns), \(TokenRepository.deviceDisabled) FROM tokens t WHERE t.digest = \(digest)::bytea"
        ).first
    }

    /// Records when tokens were last used (batched by the relay), to the minute: a row is
    /// rewritten only when its time moves on by a minute or more, so an app that reconnects every
    /// few seconds costs one row version a minute, not one per connection (`last_used_at` in
    /// docs/openapi.json says so). In `token_uses`, not `tokens`: a token's row that is never
    /// written stays on a page its lookups read from the index alone (migration 0016).
    public func touch(_ lastUsed: [Int64: UnixTime]) throws {
        guard !lastUsed.isEmpty else { return }
        let uses = Array(lastUsed)
        try db.executePrepared(
            """
            INSERT INTO token_uses AS u (token_id, last_used_at)
            SELECT t.id, n.at FROM unnest(\(uses.map(\.key))::bigint[], \(uses.map(\.value))::timestamptz[]) AS n(id, at)
            JOIN tokens t ON t.id = n.id
            ON CONFLICT (token_id) DO UPDATE SET last_used_at = excluded.last_used_at
            WHERE u.last_used_at <= excluded.last_used_at - interval '1 minute'
            """)
    }

    /// The entries `query` reads (a token's columns and `deviceDisabled`).
    private func credentials(_ query: PGQuery) throws -> [CredentialEntry] {
        try db.execute(query).records.compactMap { row in
            try TokenRepository.decode(row).credential.map { CredentialEntry(token: $0, deviceDisabled: try row.bool("device_disabled")) }
        }
    }

    /// Whether a token's device is disabled (every token has its device: a foreign key). Asked of
    /// the index of disabled devices only (migration 0015): for an enabled device a few pages,
    /// where joining `devices` cost a third of a cold lookup.
    private static let deviceDisabled: PGQuery =
        "EXISTS (SELECT 1 FROM devices d WHERE d.id = t.device_id AND d.disabled_at IS NOT NULL) AS device_disabled"

    static func decode(_ row: PGRow) throws -> TokenRecord {
        TokenRecord(id: try row.int64("id"), deviceID: try row.deviceID("device_id"), role: try row.value("role"),
                    label: try row.string("label"), digest: try row.bytes("digest"), createdAt: try row.time("created_at"),
                    expiresAt: try row.optionalTime("expires_at"), revokedAt: try row.optionalTime("revoked_at"),
                    lastUsedAt: try row.optionalTime("last_used_at"), access: try row.value("access"),
                    control: try row.bool("control"))
    }
}

