import RelayCore
import RelayCrypto

/// Who changes the household, for the audit log (docs/protocol.md v1.3 "Members": "with who did it").
public enum HouseholdActor: Sendable, Equatable {
    /// An owner's app token.
    case owner(tokenID: Int64)
    /// The member itself (leaving).
    case member(tokenID: Int64)
    case robot
    case operatorCLI

    /// The audit row's `actor`.
    var name: String {
        switch self {
        case .owner: "owner"
        case .member: "member"
        case .robot: "robot"
        case .operatorCLI: "cli"
        }
    }

    /// The audit row's `details.by` and `details.by_token_id`.
    var details: [(String, JSONValue)] {
        switch self {
        case .owner(let id): [("by", "owner"), ("by_token_id", .int(id))]
        case .member(let id): [("by", "member"), ("by_token_id", .int(id))]
        case .robot: [("by", "robot")]
        case .operatorCLI: [("by", "operator")]
        }
    }
}

/// A pending invitation, never with its code (only `create` returns that, once).
public struct InviteRecord: Sendable, Equatable {
    public var id: Int64
    public var rights: MemberRights
    public var until: UnixTime?
    public var label: String
    public var createdAt: UnixTime
    public var expiresAt: UnixTime

    /// What it grants, as the audit log and the API state it.
    public var fields: [(String, JSONValue)] {
        [("invite_id", .int(id))] + rights.fields(until: until) + [("label", .string(label))]
    }
}

/// The household in the store (docs/protocol.md v1.3): invitations (pairing codes that carry an
/// access level), members (the device's live app tokens) and the last-owner rule. Every change
/// locks the device's row first, so two owners acting at once can neither leave the device
/// without an owner nor pass 20 pending invites.
public struct HouseholdRepository {
    let db: PGConnection

    public init(_ db: PGConnection) { self.db = db }

    static let inviteColumns: PGQuery = "id, access, control, until, label, created_at, expires_at"
    /// A pairing code that is an invitation nobody redeemed or cancelled yet.
    static let pendingInviteCondition: PGQuery = "access IS NOT NULL AND used_at IS NULL AND cancelled_at IS NULL AND expires_at > now()"
    /// An app token that is a member now (`tokens t`): neither revoked nor expired.
    static let liveMemberCondition: PGQuery = "t.role = 'app' AND t.revoked_at IS NULL AND (t.expires_at IS NULL OR t.expires_at > now())"

    public func createInvite(device: DeviceID, _ invite: HouseholdRules.Invite, by actor: HouseholdActor,
                             address: String?) throws -> (invite: InviteRecord, code: String) {
        let code = try PairingCode.generate()
        let digest = PairingCode.digest(PairingCode.normalize(code)!)
        return try db.transaction {
            try lockDevice(device, for: actor)
            if try pendingInvites(device: device).count >= HouseholdRules.maxPendingInvites {
                throw RelayError(.tooManyInvites, "this device has \(HouseholdRules.maxPendingInvites) pending invites; cancel one first")
            }
            let rows = try db.execute(
                """
                INSERT INTO pairing_codes (device_id, digest, expires_at, created_by, access, control, until, label, invited_by)
                VALUES (\(device), \(digest)::bytea, now() + make_interval(secs => \(invite.expiresIn)::bigint), \(actor.name),
                        \(invite.rights.access), \(invite.rights.control), \(invite.until)::timestamptz, \(invite.label),
                        \(invitedBy(actor))::bigint)
                RETURNING \(HouseholdRepository.inviteColumns)
                """)
            let record = try HouseholdRepository.decodeInvite(rows.single())
            try audit(.inviteCreated, device: device, tokenID: nil, actor: actor, address: address,
                      details: record.fields)
            return (record, code)
        }
    }

    /// Pending invites of `device`, oldest first.
    public func pendingInvites(device: DeviceID) throws -> [InviteRecord] {
        try db.execute(
            """
            SELECT \(HouseholdRepository.inviteColumns) FROM pairing_codes
            WHERE device_id = \(device) AND \(HouseholdRepository.pendingInviteCondition)
            ORDER BY id
            """).records.map(HouseholdRepository.decodeInvite)
    }

    /// Cancels a pending invite of `device`: its code stops working. False: no such pending invite.
    public func cancelInvite(device: DeviceID, id: Int64, by actor: HouseholdActor, address: String?) throws -> Bool {
        try db.transaction {
            try lockDevice(device, for: actor)
            let rows = try db.execute(
                """
                UPDATE pairing_codes SET cancelled_at = now()
                WHERE id = \(id) AND device_id = \(device) AND \(HouseholdRepository.pendingInviteCondition)
                RETURNING \(HouseholdRepository.inviteColumns)
                """)
            guard let row = rows.firstRecord else { return false }
            try audit(.inviteCancelled, device: device, tokenID: nil, actor: actor, address: address,
                      details: try HouseholdRepository.decodeInvite(row).fields)
            return true
        }
    }

    /// Every app token of `device` that is neither revoked nor expired, oldest first.
    public func members(device: DeviceID) throws -> [TokenRecord] {
        try db.execute(
            """
            SELECT \(TokenRepository.columns) FROM tokens t
            WHERE t.device_id = \(device) AND \(HouseholdRepository.liveMemberCondition)
            ORDER BY t.id
            """).records.map(TokenRepository.decode)
    }

    /// Applies `change` to member `tokenID` of `device`: the member after it. The last owner
    /// can't be downgraded.
    public func updateMember(device: DeviceID, tokenID: Int64, _ change: HouseholdRules.MemberChange, by actor: HouseholdActor,
                             address: String?) throws -> TokenRecord {
        let now = db.clock.wall()
        return try db.transaction {
            try lockDevice(device, for: actor)
            let current = try liveMember(device: device, tokenID: tokenID)
            let after = try change.applied(to: current.rights, until: current.until, now: now)
            if current.access == .owner, after.rights.access != .owner, try otherOwners(device: device, than: tokenID) == 0 {
                throw RelayError(.lastOwner, "the device's last owner can't be downgraded; make someone else owner first")
            }
            let rows = try db.execute(
                """
                UPDATE tokens t SET access = \(after.rights.access), control = \(after.rights.control), expires_at = \(after.until)::timestamptz
                WHERE t.id = \(tokenID)
                RETURNING \(TokenRepository.columns)
                """)
            let updated = try TokenRepository.decode(rows.single())
            try audit(.memberChanged, device: device, tokenID: tokenID, actor: actor, address: address,
                      details: [("before", .object(current.memberFields(labelled: true))),
                                ("after", .object(updated.memberFields(labelled: true)))])
            try TimelineRepository(db).householdChange("member_changed", device: device, member: updated)
            // Shared history is a family member's (v1.6): made guest or owner, the member loses it.
            if updated.access != .family {
                try db.execute(
                    """
                    DELETE FROM sealed_history_grants g USING sealed_member_keys k
                    WHERE k.app_token_id = \(tokenID) AND g.device_id = k.device_id AND g.kid = k.kid
                    """)
            }
            return updated
        }
    }

    /// Removes member `tokenID` of `device`: its token is revoked (every node closes its sockets,
    /// its push registrations go, and the revocation asks for its TURN sessions to be cut — the
    /// store's triggers). The last owner can't be removed.
    public func removeMember(device: DeviceID, tokenID: Int64, by actor: HouseholdActor, address: String?) throws {
        try db.transaction {
            try lockDevice(device, for: actor)
            let current = try liveMember(device: device, tokenID: tokenID)
            if current.access == .owner, try otherOwners(device: device, than: tokenID) == 0 {
                throw RelayError(.lastOwner, "the device's last owner can't be removed; make someone else owner first")
            }
            try db.execute("UPDATE tokens SET revoked_at = now() WHERE id = \(tokenID)")
            try audit(.memberRemoved, device: device, tokenID: tokenID, actor: actor, address: address,
                      details: [("member", .object(current.memberFields(labelled: true)))])
            try TimelineRepository(db).householdChange("member_left", device: device, member: current)
        }
    }

    // MARK: - Parts

    /// Locks `device`'s row (every household change of a device goes one at a time) and checks
    /// that an owner acting still is one: the caller's token was checked against a node's
    /// cache, which may be a moment behind a downgrade or removal on another node.
    private func lockDevice(_ device: DeviceID, for actor: HouseholdActor) throws {
        guard let record = try DeviceRepository(db).lock(device, .update) else {
            throw RelayError(.notFound, "unknown device \(device)")
        }
        if record.isDisabled { throw RelayError(.deviceDisabled, "device \(device) is disabled") }
        guard case .owner(let tokenID) = actor else { return }
        let owner = try db.execute(
            """
            SELECT 1 FROM tokens t
            WHERE t.id = \(tokenID) AND t.device_id = \(device) AND t.access = 'owner' AND \(HouseholdRepository.liveMemberCondition)
            """)
        if owner.rows.isEmpty { throw RelayError(.forbidden, "this token is no longer an owner of the device") }
    }

    private func liveMember(device: DeviceID, tokenID: Int64) throws -> TokenRecord {
        guard let row = try db.execute(
            """
            SELECT \(TokenRepository.columns) FROM tokens t
            WHERE t.id = \(tokenID) AND t.device_id = \(device) AND \(HouseholdRepository.liveMemberCondition)
            FOR UPDATE
            """).firstRecord
        else { throw RelayError(.notFound, "no member \(tokenID) on this device") }
        return try TokenRepository.decode(row)
    }

    private func otherOwners(device: DeviceID, than tokenID: Int64) throws -> Int {
        let rows = try db.execute(
            """
            SELECT count(*) AS owners FROM tokens t WHERE t.device_id = \(device) AND t.access = 'owner' AND t.id <> \(tokenID)
              AND \(HouseholdRepository.liveMemberCondition)
            """)
        return try rows.single().int("owners")
    }

    private func invitedBy(_ actor: HouseholdActor) -> Int64? {
        if case .owner(let id) = actor { return id }
        return nil
    }

    private func audit(_ kind: AuditKind, device: DeviceID, tokenID: Int64?, actor: HouseholdActor, address: String?,
                       details: [(String, JSONValue)]) throws {
        try AuditRepository(db).append([
            AuditRepository.event(kind, at: db.clock.wall(),
                                  actor: actor.name, deviceID: device.rawValue, tokenID: tokenID, remoteAddress: address,
                                  details: .object(details + actor.details)),
        ])
    }

    static func decodeInvite(_ row: PGRow) throws -> InviteRecord {
        InviteRecord(id: try row.int64("id"), rights: MemberRights(access: try row.value("access"), control: try row.bool("control")),
                     until: try row.optionalTime("until"), label: try row.optionalString("label") ?? "",
                     createdAt: try row.time("created_at"), expiresAt: try row.time("expires_at"))
    }
}
