import RelayCore

/// Push registrations in the store (docs/protocol.md v1.2 "Push notifications"). The table's triggers
/// notify every node's mirror, audit each removal with its reason, and follow revoked tokens and
/// disabled devices (migrations/0007_push_registrations.sql).
public struct PushRepository {
    let db: PGConnection

    public init(_ db: PGConnection) { self.db = db }

    /// Registrations one app token may hold; one more is refused.
    public static let perAppToken = 10

    public enum Saved: Sendable {
        case saved(PushRegistration)
        case tooMany
    }

    static let columns: PGQuery = "device_id, token, environment, app_token_id, array_to_string(events, ',') AS events"

    static func decode(_ row: PGRow) throws -> PushRegistration {
        // A kind this build does not know (stored by a newer one) is left out.
        let kinds = Set((try row.optionalString("events") ?? "").split(separator: ",").compactMap { PushKind(rawValue: String($0)) })
        return PushRegistration(token: try row.string("token"), environment: try row.value("environment"),
                                device: try row.deviceID("device_id"), appTokenID: try row.int64("app_token_id"), kinds: kinds)
    }

    /// Puts `registration`: the same token again replaces its events (and moves to this app
    /// token); a new one past `perAppToken` of this app token is refused.
    public func save(_ registration: PushRegistration, address: String?) throws -> Saved {
        try db.transaction {
            // One app token's registrations are counted under its row's lock: two nodes cannot both add the eleventh.
            _ = try db.execute("SELECT 1 FROM tokens WHERE id = \(registration.appTokenID) FOR UPDATE")
            let existing = try db.execute(
                "SELECT app_token_id FROM push_registrations WHERE device_id = \(registration.device) AND token = \(registration.token)"
            ).firstRecord
            let count = try db.execute("SELECT count(*) AS registrations FROM push_registrations WHERE app_token_id = \(registration.appTokenID)")
                .single().int("registrations")
            let isNewHere = try existing?.int64("app_token_id") != registration.appTokenID
            if isNewHere, count >= Self.perAppToken { return .tooMany }
            let events = registration.kinds.map(\.rawValue).sorted()
            try db.execute(
                """
                INSERT INTO push_registrations (device_id, token, environment, app_token_id, events)
                VALUES (\(registration.device), \(registration.token), \(registration.environment), \(registration.appTokenID)::bigint,
                        \(events)::text[])
                ON CONFLICT (device_id, token) DO UPDATE
                SET environment = EXCLUDED.environment, app_token_id = EXCLUDED.app_token_id, events = EXCLUDED.events,
                    updated_at = now()
                """)
            try AuditRepository(db).append([
                AuditRepository.event(.pushRegistered, at: db.clock.wall(), actor: "app", deviceID: registration.device.rawValue,
                                      tokenID: registration.appTokenID, remoteAddress: address,
                                      details: .object([("token_suffix", .string(String(registration.token.suffix(8)))),
                                                        ("environment", .string(registration.environment.rawValue)),
                                                        ("events", .array(registration.kinds.map(\.rawValue).sorted().map { .string($0) }))])),
            ])
            return .saved(registration)
        }
    }

    /// Removes `token` of `device` if `appTokenID` holds it (nil: whoever holds it), auditing
    /// `reason`. True when a row went.
    @discardableResult
    public func remove(device: DeviceID, token: String, appTokenID: Int64?, reason: String) throws -> Bool {
        try db.transaction {
            try db.execute("SELECT set_config('wimz.push_removal_reason', \(reason), true)")
            let rows = try db.execute("""
                DELETE FROM push_registrations
                WHERE device_id = \(device) AND token = \(token) AND (\(appTokenID)::bigint IS NULL OR app_token_id = \(appTokenID)::bigint)
                RETURNING 1
                """)
            return !rows.rows.isEmpty
        }
    }

    /// The registrations of one device (nil: of every device).
    public func registrations(device: DeviceID?) throws -> [PushRegistration] {
        try db.execute(
            "SELECT \(Self.columns) FROM push_registrations WHERE \(device)::text IS NULL OR device_id = \(device) ORDER BY device_id, token"
        ).records.map(Self.decode)
    }

    /// The registrations of these devices (the devices a node begins to serve, read in one
    /// statement: the storm after a restart asks for many at once).
    public func registrations(devices: [DeviceID]) throws -> [PushRegistration] {
        guard !devices.isEmpty else { return [] }
        return try db.executePrepared(
            "SELECT \(Self.columns) FROM push_registrations WHERE device_id = ANY (\(devices)::text[]) ORDER BY device_id, token"
        ).records.map(Self.decode)
    }

    /// Registrations whose app token expired (time passed; nothing updated the token row).
    public func removeExpired() throws {
        try db.transaction {
            try db.execute("SELECT set_config('wimz.push_removal_reason', 'token_expired', true)")
            try db.execute("DELETE FROM push_registrations r USING tokens t WHERE r.app_token_id = t.id AND t.expires_at <= now()")
        }
    }

    /// Claims the `robot_offline` push of every device whose robot left at least `after`
    /// seconds ago, is not back on any live node, and has a registration for it made before it
    /// left. One statement: concurrent nodes cannot both claim a departure.
    public func claimRobotOffline(after seconds: Double) throws -> [DeviceID] {
        try db.execute(
            """
            UPDATE device_robot_left l SET offline_pushed_at = now()
            WHERE l.left_at <= now() - make_interval(secs => \(seconds)::double precision)
              AND (l.offline_pushed_at IS NULL OR l.offline_pushed_at < l.left_at)
              AND EXISTS (SELECT 1 FROM push_registrations r
                          WHERE r.device_id = l.device_id AND 'robot_offline' = ANY (r.events) AND r.created_at <= l.left_at)
              AND NOT EXISTS (SELECT 1 FROM device_presence p JOIN relay_nodes n USING (node_id)
                              WHERE p.device_id = l.device_id AND p.robot_since IS NOT NULL AND n.lease_expires_at > now())
            RETURNING l.device_id
            """).records.map { try $0.deviceID("device_id") }
    }
}
