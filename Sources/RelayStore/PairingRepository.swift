import RelayCore
import RelayCrypto

/// Pairing codes in the store (docs/protocol.md v1.1 "Pairing a phone"): minted for a device, redeemed once
/// for an app token. Failed redemptions are counted per client address in the database, so the
/// limit holds across every node.
public struct PairingRepository {
    let db: PGConnection

    public init(_ db: PGConnection) { self.db = db }

    /// Failed redemptions allowed per address and minute; the next one is refused (429).
    public static let failuresPerMinute = 10

    public struct MintedCode: Sendable {
        public var code: String
        public var expiresAt: UnixTime
        public var expiresIn: Int
    }

    public enum Redemption: Sendable {
        case paired(device: DeviceID, token: IssuedToken)
        /// Wrong, used or expired: one answer for all three.
        case invalid
        /// Over `failuresPerMinute` from this address.
        case rateLimited
    }

    /// Mints a code for an existing, enabled device, valid for `ttl` seconds.
    public func create(device: DeviceID, ttl: Int, actor: String, address: String?) throws -> MintedCode {
        let code = try PairingCode.generate()
        let digest = PairingCode.digest(PairingCode.normalize(code)!)
        return try db.transaction {
            guard let record = try DeviceRepository(db).lock(device, .share) else {
                throw StoreError(.notFound, "unknown device \(device)")
            }
            if record.isDisabled { throw StoreError(.conflict, "device \(device) is disabled") }
            let rows = try db.execute(
                """
                INSERT INTO pairing_codes (device_id, digest, expires_at, created_by)
                VALUES (\(device), \(digest)::bytea, now() + make_interval(secs => \(ttl)::bigint), \(actor)) RETURNING id, expires_at
                """)
            let minted = try rows.single()
            let expires = try minted.time("expires_at")
            try AuditRepository(db).append([
                AuditRepository.event(.pairingCodeCreated, at: db.clock.wall(),
                                      actor: actor, deviceID: device.rawValue, remoteAddress: address,
                                      details: .object([("code_id", .int(try minted.int64("id"))),
                                                        ("expires_at", .string(expires.iso8601))])),
            ])
            return MintedCode(code: code, expiresAt: expires, expiresIn: ttl)
        }
    }

    /// Redeems `typed` for a new app token labelled `label`: once, before its expiry, from an
    /// address under the failure limit. Every failure is recorded and audited.
    public func redeem(_ typed: String, label: String, address: String) throws -> Redemption {
        try db.transaction {
            let failures = try db.execute(
                "SELECT count(*) AS failures FROM pairing_failures WHERE address = \(address) AND at > now() - interval '1 minute'")
            if try failures.single().int("failures") >= PairingRepository.failuresPerMinute {
                try AuditRepository(db).append([
                    AuditRepository.event(.pairingRateLimited, at: db.clock.wall(), actor: "relay", remoteAddress: address),
                ])
                return .rateLimited
            }
            let normalized = PairingCode.normalize(typed)
            let digest = normalized.map(PairingCode.digest)
            // Looked up by the code's SHA-256 digest; the stored digest is compared again in
            // constant time, so neither step's timing says anything about the code.
            let row = try digest.flatMap { digest in
                try db.execute(
                    """
                    SELECT id, device_id, digest, access, control, until, label FROM pairing_codes
                    WHERE digest = \(digest)::bytea AND used_at IS NULL AND cancelled_at IS NULL AND expires_at > now()
                      AND (until IS NULL OR until > now()) FOR UPDATE
                    """).firstRecord
            }
            guard let row, let digest, Crypto.constantTimeEquals(try row.bytes("digest"), digest) else {
                try db.execute("DELETE FROM pairing_failures WHERE at < now() - interval '1 hour'")
                try db.execute("INSERT INTO pairing_failures (address) VALUES (\(address))")
                try AuditRepository(db).append([
                    AuditRepository.event(.pairingFailed, at: db.clock.wall(), actor: "relay", remoteAddress: address),
                ])
                return .invalid
            }
            let codeID = try row.int64("id"), device = try row.deviceID("device_id")
            // An invite (v1.3) grants its access, until its `until`; a plain pairing code makes an owner.
            let invited: Access? = try row.optionalValue("access")
            let rights = MemberRights(access: invited ?? .owner, control: try row.optionalBool("control") ?? false)
            let name = invited != nil && label.isEmpty ? try row.optionalString("label") ?? "" : label
            let issued = try TokenRepository(db).issue(device: device, role: .app, label: name, expiresIn: nil,
                                                       until: invited != nil ? try row.optionalTime("until") : nil, rights: rights,
                                                       actor: "pairing")
            try db.execute("UPDATE pairing_codes SET used_at = now(), token_id = \(issued.record.id) WHERE id = \(codeID)")
            var details: [(String, JSONValue)] = [("code_id", .int(codeID)), ("label", .string(name))]
            if invited != nil { details += [("invite_id", .int(codeID)), ("access", .string(rights.access.rawValue))] }
            try AuditRepository(db).append([
                AuditRepository.event(invited != nil ? .inviteRedeemed : .appPaired, at: db.clock.wall(),
                                      actor: "relay", deviceID: device.rawValue,
                                      tokenID: issued.record.id, remoteAddress: address, details: .object(details)),
            ])
            try TimelineRepository(db).householdChange("member_joined", device: device, member: issued.record)
            return .paired(device: device, token: issued)
        }
    }
}
