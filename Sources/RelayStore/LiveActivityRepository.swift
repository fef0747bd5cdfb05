import RelayCore

/// The Live Activity tokens apps hand over (docs/protocol.md v1.4 "Tokens the app hands over"). The
/// tables' triggers notify every node's mirror, audit each removal with its reason, and follow
/// revoked or expired tokens and disabled devices (migrations/0013_live_activities.sql).
public struct LiveActivityRepository {
    let db: PGConnection

    public init(_ db: PGConnection) { self.db = db }

    public enum Saved: Sendable, Equatable {
        case saved(LiveActivityRegistration)
        /// The app token already holds `LiveActivityRegistration.activitiesPerAppToken` other activities.
        case tooMany
    }

    /// Stores `registration` (its `createdAt` is ignored): a start token replaces the app token's
    /// previous one; an activity id already held gets the new token; a new activity past the
    /// limit is refused. Audited as `live_activity_registered`.
    public func save(_ registration: LiveActivityRegistration, address: String?) throws -> Saved {
        try db.transaction {
            let device = registration.device, appToken = registration.appTokenID
            let row: PGRows
            switch registration.kind {
            case .startToken:
                row = try db.execute(
                    """
                    INSERT INTO live_activity_start_tokens (device_id, app_token_id, token, environment)
                    VALUES (\(device), \(appToken)::bigint, \(registration.token), \(registration.environment))
                    ON CONFLICT (device_id, app_token_id) DO UPDATE
                    SET token = EXCLUDED.token, environment = EXCLUDED.environment, created_at = now()
                    RETURNING created_at
                    """)
            case .activity(let id):
                // Counted under the app token's row lock: two nodes cannot both add the fifth.
                _ = try db.execute("SELECT 1 FROM tokens WHERE id = \(appToken) FOR UPDATE")
                let others = try db.execute(
                    """
                    SELECT count(*) AS others FROM live_activities
                    WHERE device_id = \(device) AND app_token_id = \(appToken)::bigint AND activity_id <> \(id.rawValue)
                    """).single().int("others")
                if others >= LiveActivityRegistration.activitiesPerAppToken { return .tooMany }
                row = try db.execute(
                    """
                    INSERT INTO live_activities (device_id, app_token_id, activity_id, token, environment)
                    VALUES (\(device), \(appToken)::bigint, \(id.rawValue), \(registration.token), \(registration.environment))
                    ON CONFLICT (device_id, app_token_id, activity_id) DO UPDATE
                    SET token = EXCLUDED.token, environment = EXCLUDED.environment
                    RETURNING created_at
                    """)
            }
            var details: [(String, JSONValue)] = [("kind", .string(registration.activityID == nil ? "start_token" : "activity")),
                                                 ("token_suffix", .string(String(registration.token.suffix(8)))),
                                                 ("environment", .string(registration.environment.rawValue))]
            if let id = registration.activityID { details.append(("activity_id", .string(id.rawValue))) }
            try AuditRepository(db).append([
                AuditRepository.event(.liveActivityRegistered, at: db.clock.wall(),
                                      actor: "app", deviceID: device.rawValue, tokenID: registration.appTokenID,
                                      remoteAddress: address, details: .object(details)),
            ])
            var saved = registration
            saved.createdAt = try row.single().time("created_at")
            return .saved(saved)
        }
    }

    /// Removes the app token's start token (`activity` nil) or that activity, auditing `reason`
    /// (the trigger writes `live_activity_removed`). True when a row went.
    @discardableResult
    public func remove(device: DeviceID, appTokenID: Int64, activity: LiveActivityID?, reason: String) throws -> Bool {
        try db.transaction {
            try db.execute("SELECT set_config('wimz.live_activity_removal_reason', \(reason), true)")
            let rows = if let activity {
                try db.execute("""
                    DELETE FROM live_activities
                    WHERE device_id = \(device) AND app_token_id = \(appTokenID)::bigint AND activity_id = \(activity.rawValue) RETURNING 1
                    """)
            } else {
                try db.execute(
                    "DELETE FROM live_activity_start_tokens WHERE device_id = \(device) AND app_token_id = \(appTokenID)::bigint RETURNING 1")
            }
            return !rows.rows.isEmpty
        }
    }

    /// The start tokens and activities of one device (nil: of every device), start tokens first,
    /// then by app token and activity id.
    public func registrations(device: DeviceID?) throws -> [LiveActivityRegistration] {
        try db.execute(Self.registrations(where: { "\(device)::text IS NULL OR device_id = \(device)" })).records.map(Self.decode)
    }

    /// The start tokens and activities of these devices, ordered as `registrations(device:)`.
    public func registrations(devices: [DeviceID]) throws -> [LiveActivityRegistration] {
        guard !devices.isEmpty else { return [] }
        return try db.executePrepared(Self.registrations(where: { "device_id = ANY (\(devices)::text[])" })).records.map(Self.decode)
    }

    /// Both tables' rows that meet `condition` (asked once for each table), start tokens first,
    /// then by app token and activity.
    private static func registrations(where condition: () -> PGQuery) -> PGQuery {
        """
        SELECT device_id, app_token_id, NULL::text AS activity_id, token, environment, created_at
        FROM live_activity_start_tokens WHERE \(condition())
        UNION ALL
        SELECT device_id, app_token_id, activity_id, token, environment, created_at
        FROM live_activities WHERE \(condition())
        ORDER BY device_id, app_token_id, activity_id NULLS FIRST
        """
    }

    /// Tokens whose app token expired (time passed; nothing updated the token row).
    public func removeExpired() throws {
        try db.transaction {
            try db.execute("SELECT set_config('wimz.live_activity_removal_reason', 'token_expired', true)")
            try db.execute("DELETE FROM live_activity_start_tokens s USING tokens t WHERE s.app_token_id = t.id AND t.expires_at <= now()")
            try db.execute("DELETE FROM live_activities a USING tokens t WHERE a.app_token_id = t.id AND t.expires_at <= now()")
        }
    }

    static func decode(_ row: PGRow) throws -> LiveActivityRegistration {
        let kind: LiveActivityRegistration.Kind
        if let text = try row.optionalString("activity_id") {
            guard let id = LiveActivityID(text) else { throw StoreError(.schema, "column activity_id is not an activity id") }
            kind = .activity(id)
        } else {
            kind = .startToken
        }
        return LiveActivityRegistration(device: try row.deviceID("device_id"), appTokenID: try row.int64("app_token_id"), kind: kind,
                                        token: try row.string("token"), environment: try row.value("environment"),
                                        createdAt: try row.optionalTime("created_at"))
    }
}
