import RelayCore

/// The sealed household's store (docs/protocol.md "The sealed household (v1.5)";
/// migrations/0014_sealed.sql): apps' public keys, the epochs the robot accepted, and each
/// member's sealed package. Nothing here opens a frame.
public struct SealedRepository {
    let db: PGConnection

    public init(_ db: PGConnection) { self.db = db }

    // The values the rules read from request bodies (`SealedRules`, RelayCore), by their names here.
    public typealias MemberKey = SealedRules.MemberKey
    public typealias Package = SealedRules.Package
    public typealias EpochUpload = SealedRules.EpochUpload

    /// What an app is handed for one epoch: the signed roster, the robot's acceptance, its own package.
    public struct EpochForMember: Sendable, Equatable {
        public var epoch: Int
        public var roster: String
        public var signedBy: String
        public var signature: String
        public var robotSignature: String
        public var package: Package
        /// An owner's grant of earlier history to this member (v1.6), as put.
        public var history: SealedRules.SignedGrant?
    }

    public enum EpochLookup: Sendable, Equatable {
        case found(EpochForMember)
        /// The device has no such epoch (or none at all: it is not sealed).
        case noEpoch
        /// The epoch exists but holds no package for the caller's key (or the caller has no key).
        case notInRoster
    }

    /// Stores an app token's keys for its device, replacing what the token or that `kid` had
    /// before (an app that paired again brings its key to its new token). Audited.
    public func setMemberKey(device: DeviceID, _ key: MemberKey, address: String?) throws {
        try db.transaction {
            try db.execute(
                "DELETE FROM sealed_member_keys WHERE device_id = \(device) AND (app_token_id = \(key.appTokenID)::bigint OR kid = \(key.kid))")
            try db.execute(
                """
                INSERT INTO sealed_member_keys (device_id, app_token_id, kid, sign_key, hpke_key)
                VALUES (\(device), \(key.appTokenID)::bigint, \(key.kid), \(key.sign), \(key.hpke))
                """)
            try AuditRepository(db).append([
                AuditRepository.event(.sealedMemberKeySet, at: db.clock.wall(), actor: "app", deviceID: device.rawValue,
                                      tokenID: key.appTokenID, remoteAddress: address, details: .object([("kid", .string(key.kid))])),
            ])
        }
    }

    /// The keys of live members whose `kid` has no package in the current epoch (every member's,
    /// before the first), with the member's token: what an owner's app signs in next.
    public func pendingMembers(device: DeviceID) throws -> [(key: MemberKey, member: TokenRecord)] {
        try liveMembers(device: device, inCurrentEpoch: false)
    }

    /// Live members whose keys have a package in the current epoch, with their token as it is now
    /// (a v1.3 `PATCH` may have changed its access, control or until since they were signed in).
    public func signedInMembers(device: DeviceID) throws -> [(key: MemberKey, member: TokenRecord)] {
        try liveMembers(device: device, inCurrentEpoch: true)
    }

    private func liveMembers(device: DeviceID, inCurrentEpoch: Bool) throws -> [(key: MemberKey, member: TokenRecord)] {
        let inEpoch: PGQuery = inCurrentEpoch ? "EXISTS" : "NOT EXISTS"
        return try db.execute(
            """
            SELECT k.kid, k.sign_key, k.hpke_key, \(TokenRepository.columns)
            FROM sealed_member_keys k JOIN tokens t ON t.id = k.app_token_id
            WHERE k.device_id = \(device) AND \(HouseholdRepository.liveMemberCondition)
              AND \(inEpoch) (SELECT 1 FROM sealed_packages p WHERE p.device_id = k.device_id AND p.kid = k.kid
                              AND p.epoch = (SELECT max(epoch) FROM sealed_epochs e WHERE e.device_id = k.device_id))
            ORDER BY t.id
            """).records.map { row in
            let member = try TokenRepository.decode(row)
            return (MemberKey(appTokenID: member.id, kid: try row.string("kid"), sign: try row.string("sign_key"),
                              hpke: try row.string("hpke_key")), member)
        }
    }

    /// The `kid`s with a package in the current epoch whose member has gone at the relay (its
    /// token removed, left, revoked or past its `until`): what an owner's app signs out next.
    public func departedMembers(device: DeviceID) throws -> [String] {
        try db.execute(
            """
            SELECT p.kid FROM sealed_packages p
            WHERE p.device_id = \(device) AND p.epoch = (SELECT max(epoch) FROM sealed_epochs e WHERE e.device_id = p.device_id)
              AND NOT EXISTS (SELECT 1 FROM sealed_member_keys k JOIN tokens t ON t.id = k.app_token_id
                              WHERE k.device_id = p.device_id AND k.kid = p.kid AND \(HouseholdRepository.liveMemberCondition))
            ORDER BY p.kid
            """).records.map { try $0.string("kid") }
    }

    /// The device's current epoch (nil: not sealed).
    public func currentEpoch(device: DeviceID) throws -> Int? {
        try db.execute("SELECT max(epoch) AS epoch FROM sealed_epochs WHERE device_id = \(device)")
            .single().optionalInt64("epoch").map { Int($0) }
    }

    /// Stores the next epoch: refused (409 `conflict`) unless it is the current one + 1, under the
    /// device's row lock. A member whose key had a package in the previous epoch and has none in
    /// this one leaves the household as v1.3 removes one: its token is revoked (every node closes
    /// its sockets; its push and Live Activity registrations go; its TURN sessions are cut), and
    /// audited `member_removed` with reason `roster`. Returns the tokens removed.
    @discardableResult
    public func addEpoch(device: DeviceID, _ upload: EpochUpload, address: String?) throws -> [Int64] {
        try db.transaction {
            guard let record = try DeviceRepository(db).lock(device, .update) else { throw RelayError(.notFound, "unknown device \(device)") }
            if record.isDisabled { throw RelayError(.deviceDisabled, "device \(device) is disabled") }
            let current = try currentEpoch(device: device) ?? 0
            guard upload.epoch == current + 1 else {
                throw RelayError(.conflict, "the device's current epoch is \(current): the next one is \(current + 1)")
            }
            try db.execute(
                """
                INSERT INTO sealed_epochs (device_id, epoch, roster, signed_by, signature, robot_sig)
                VALUES (\(device), \(upload.epoch)::int, \(upload.roster), \(upload.signedBy), \(upload.signature), \(upload.robotSignature))
                """)
            for package in upload.packages {
                try db.execute(
                    "INSERT INTO sealed_packages (device_id, epoch, kid, sealed) VALUES (\(device), \(upload.epoch)::int, \(package.kid), \(package.sealed))")
            }
            let removed = try db.execute(
                """
                UPDATE tokens t SET revoked_at = now()
                FROM sealed_member_keys k
                WHERE k.device_id = \(device) AND k.app_token_id = t.id AND \(HouseholdRepository.liveMemberCondition)
                  AND EXISTS (SELECT 1 FROM sealed_packages p WHERE p.device_id = k.device_id AND p.epoch = \(upload.epoch)::int - 1
                              AND p.kid = k.kid)
                  AND NOT EXISTS (SELECT 1 FROM sealed_packages p WHERE p.device_id = k.device_id AND p.epoch = \(upload.epoch)::int
                                  AND p.kid = k.kid)
                RETURNING t.id, k.kid
                """).records.map { row in (try row.int64("id"), try row.string("kid")) }
            let now = db.clock.wall()
            try rosterEntry(device: device, epoch: upload.epoch, members: upload.packages.map(\.kid), at: now)
            // A member this roster does not make family loses the history an owner shared with it.
            let family = (SealedRules.rosterMembers(upload.roster) ?? [:]).filter { $0.value.role == "family" }.map(\.key)
            try db.execute("DELETE FROM sealed_history_grants WHERE device_id = \(device) AND NOT (kid = ANY (\(family)::text[]))")
            try AuditRepository(db).append([
                AuditRepository.event(.sealedEpochAdded, at: now, actor: "robot", deviceID: device.rawValue, tokenID: nil,
                                      remoteAddress: address,
                                      details: .object([("epoch", .int(Int64(upload.epoch))), ("members", .int(Int64(upload.packages.count))),
                                                        ("signed_by", .string(upload.signedBy))])),
            ] + removed.map { token, kid in
                try AuditRepository.event(.memberRemoved, at: now, actor: "robot", deviceID: device.rawValue, tokenID: token, remoteAddress: address,
                                      details: .object([("reason", "roster"), ("kid", .string(kid)), ("epoch", .int(Int64(upload.epoch)))]))
            })
            return removed.map(\.0)
        }
    }

    /// The timeline's `roster` entry of a new epoch (v1.6): `{"epoch":E,"in":[KID…],"out":[KID…]}`
    /// against the previous epoch's members (all in for epoch 1), by their packages' KIDs.
    private func rosterEntry(device: DeviceID, epoch: Int, members: [String], at: UnixTime) throws {
        let previous = Set(try db.execute(
            "SELECT kid FROM sealed_packages WHERE device_id = \(device) AND epoch = \(epoch)::int - 1").records.map { try $0.string("kid") })
        let current = Set(members)
        let data = JSONValue.object([("epoch", .int(Int64(epoch))), ("in", .array(current.subtracting(previous).sorted().map(JSONValue.string))),
                                     ("out", .array(previous.subtracting(current).sorted().map(JSONValue.string)))])
        let message = JSONValue.object([("type", "event"), ("event", "roster"), ("data", data)])
        try TimelineRepository(db).appendWithin([.init(device: device, at: at, source: .relay, event: "roster", message: message.encoded)])
    }

    /// Stores an owner's signed roster for the robot (`signed`: the envelope's JSON text, checked by
    /// the caller) for epoch `epoch`: refused (409 `conflict`) unless it is the current one + 1.
    /// Audited; the node holding the robot hands it over.
    public func proposeRoster(device: DeviceID, epoch: Int, signed: String, by ownerToken: Int64, address: String?) throws {
        try db.transaction {
            _ = try DeviceRepository(db).lock(device, .update)
            let current = try currentEpoch(device: device) ?? 0
            guard epoch == current + 1 else {
                throw RelayError(.conflict, "the device's current epoch is \(current): a roster for \(current + 1) is next")
            }
            try db.execute("INSERT INTO sealed_rosters (device_id, epoch, signed) VALUES (\(device), \(epoch)::int, \(signed))")
            try AuditRepository(db).append([
                AuditRepository.event(.sealedRosterProposed, at: db.clock.wall(), actor: "app", deviceID: device.rawValue,
                                      tokenID: ownerToken, remoteAddress: address, details: .object([("epoch", .int(Int64(epoch)))])),
            ])
        }
    }

    /// One proposed roster's envelope, as sent.
    public func proposedRoster(id: Int64) throws -> String? {
        try db.execute("SELECT signed FROM sealed_rosters WHERE id = \(id)").firstRecord?.string("signed")
    }

    /// The proposed rosters above the device's current epoch, oldest first: what a robot that was
    /// away has not accepted yet.
    public func pendingRosters(device: DeviceID) throws -> [String] {
        try db.execute(
            """
            SELECT signed FROM sealed_rosters
            WHERE device_id = \(device) AND epoch > COALESCE((SELECT max(epoch) FROM sealed_epochs e WHERE e.device_id = \(device)), 0)
            ORDER BY id
            """).records.map { try $0.string("signed") }
    }

    /// Epoch `epoch` (nil: the current one) as app token `appTokenID` may see it: with its own package only.
    public func epoch(device: DeviceID, _ epoch: Int?, appTokenID: Int64) throws -> EpochLookup {
        guard let row = try db.execute(
            """
            SELECT e.epoch, e.roster, e.signed_by, e.signature, e.robot_sig, p.kid, p.sealed, g.grant_b64, g.by_kid, g.signature AS grant_sig
            FROM sealed_epochs e
            LEFT JOIN sealed_member_keys k ON k.device_id = e.device_id AND k.app_token_id = \(appTokenID)::bigint
            LEFT JOIN sealed_packages p ON p.device_id = e.device_id AND p.epoch = e.epoch AND p.kid = k.kid
            LEFT JOIN sealed_history_grants g ON g.device_id = e.device_id AND g.kid = k.kid
                AND EXISTS (SELECT 1 FROM tokens t WHERE t.id = k.app_token_id AND t.access = 'family')
            WHERE e.device_id = \(device)
              AND e.epoch = COALESCE(\(epoch)::int, (SELECT max(epoch) FROM sealed_epochs c WHERE c.device_id = e.device_id))
            """).firstRecord
        else { return .noEpoch }
        guard let kid = try row.optionalString("kid"), let sealed = try row.optionalString("sealed") else { return .notInRoster }
        return .found(EpochForMember(epoch: Int(try row.int64("epoch")), roster: try row.string("roster"), signedBy: try row.string("signed_by"),
                                     signature: try row.string("signature"), robotSignature: try row.string("robot_sig"),
                                     package: Package(kid: kid, sealed: sealed), history: try Self.grant(row)))
    }

    // MARK: - History for a newcomer (v1.6)

    /// Stores an owner's grant of earlier history to family member `grant`'s kid, replacing an
    /// earlier one: `by` must be an owner of the current roster whose signature over the grant's
    /// bytes `verifies` (400 `invalid_grant` otherwise), the member a family member of it (a
    /// guest: 403 `forbidden`; anyone else: 400 `invalid_grant`). Audited.
    public func putHistoryGrant(device: DeviceID, kid: String, _ grant: SealedRules.HistoryGrant, by token: Int64, address: String?,
                                verifies: (_ signKey: String) -> Bool) throws {
        try db.transaction {
            guard let record = try DeviceRepository(db).lock(device, .update) else { throw RelayError(.notFound, "unknown device \(device)") }
            if record.isDisabled { throw RelayError(.deviceDisabled, "device \(device) is disabled") }
            guard let roster = try db.execute(
                "SELECT roster FROM sealed_epochs WHERE device_id = \(device) ORDER BY epoch DESC LIMIT 1").firstRecord?.string("roster")
            else { throw RelayError(.notFound, "this device is not sealed") }
            let members = SealedRules.rosterMembers(roster) ?? [:]
            guard let owner = members[grant.signed.by], owner.role == "owner", verifies(owner.sign) else {
                throw RelayError(.invalidGrant, "the grant is not signed by an owner of the current roster")
            }
            switch members[kid]?.role {
            case "family"?: break
            case "guest"?: throw RelayError(.forbidden, "a guest is not given the household's history")
            default: throw RelayError(.invalidGrant, "\(kid) is not a family member of the current roster")
            }
            try db.execute(
                """
                INSERT INTO sealed_history_grants (device_id, kid, grant_b64, by_kid, signature)
                VALUES (\(device), \(kid), \(grant.signed.grant), \(grant.signed.by), \(grant.signed.signature))
                ON CONFLICT (device_id, kid) DO UPDATE SET grant_b64 = EXCLUDED.grant_b64, by_kid = EXCLUDED.by_kid,
                    signature = EXCLUDED.signature, created_at = now()
                """)
            try AuditRepository(db).append([
                AuditRepository.event(.sealedHistoryGranted, at: db.clock.wall(), actor: "app", deviceID: device.rawValue, tokenID: token,
                                      remoteAddress: address,
                                      details: .object([("kid", .string(kid)), ("by", .string(grant.signed.by)),
                                                        ("epochs", .array(grant.epochs.map { .int(Int64($0)) }))])),
            ])
        }
    }

    private static func grant(_ row: PGRow) throws -> SealedRules.SignedGrant? {
        guard let grant = try row.optionalString("grant_b64"), let by = try row.optionalString("by_kid"),
              let signature = try row.optionalString("grant_sig") else { return nil }
        return SealedRules.SignedGrant(grant: grant, by: by, signature: signature)
    }
}
