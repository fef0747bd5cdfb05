/// What happened, for the append-only audit log (docs/protocol.md "What is stored and audited").
public enum AuditKind: String, Sendable, CaseIterable, Codable {
    case deviceCreated = "device_created"
    case deviceDisabled = "device_disabled"
    case deviceEnabled = "device_enabled"
    case tokenIssued = "token_issued"
    case tokenRevoked = "token_revoked"
    case robotConnected = "robot_connected"
    case robotDisconnected = "robot_disconnected"
    case robotReplaced = "robot_replaced"
    case appConnected = "app_connected"
    case appDisconnected = "app_disconnected"
    case authFailed = "auth_failed"
    case turnCredentialIssued = "turn_credential_issued"
    case turnSecretAdded = "turn_secret_added"
    case turnSecretRotated = "turn_secret_rotated"
    case turnSecretRetired = "turn_secret_retired"
    case pairingCodeCreated = "pairing_code_created"
    case appPaired = "app_paired"
    case pairingFailed = "pairing_failed"
    case pairingRateLimited = "pairing_rate_limited"
    case pushRegistered = "push_registered"
    // The household (docs/protocol.md v1.3); `details.by` says who: owner (with `by_token_id`),
    // member (itself), robot or operator.
    case inviteCreated = "invite_created"
    case inviteRedeemed = "invite_redeemed"
    case inviteCancelled = "invite_cancelled"
    case memberChanged = "member_changed"
    case memberRemoved = "member_removed"
    case memberExpired = "member_expired"
    /// A removed member's TURN sessions were cut on every TURN server (or could not be, yet).
    case turnSessionsCut = "turn_sessions_cut"
    /// Written by the store's trigger (migrations/0007), with the reason.
    case pushUnregistered = "push_unregistered"
    /// v1.4: an app handed over a Live Activity token (`details.kind`: start_token or activity).
    case liveActivityRegistered = "live_activity_registered"
    /// Written by the store's trigger (migrations/0013), with the reason.
    case liveActivityRemoved = "live_activity_removed"
    /// v1.5: an app handed over its public keys for a sealed household (`details.kid`).
    case sealedMemberKeySet = "sealed_member_key_set"
    /// v1.5: the robot stored a new epoch (`details.epoch`, `members`, `signed_by`).
    case sealedEpochAdded = "sealed_epoch_added"
    /// v1.5: an owner's app signed a roster for the robot (`details.epoch`).
    case sealedRosterProposed = "sealed_roster_proposed"
    /// v1.6: an owner shared earlier history with a family member (`details.kid`, `epochs`, `by`).
    case sealedHistoryGranted = "sealed_history_granted"
    /// v1.6: a member wrote the robot's desired settings (`details.version`, `bytes`; the token is who).
    case settingsChanged = "settings_changed"
    /// v1.6: an owner set the device's timeline retention (`details.days`).
    case timelineSettingsChanged = "timeline_settings_changed"
    /// v1.6: an owner erased the device's timeline (`details.entries`).
    case timelineErased = "timeline_erased"
}

/// One audit log entry. `id` is a UUID chosen by the writer, so a replay of the same event
/// (from the daemon's spool after a database outage) is stored once. `Codable` as a line of
/// that spool.
public struct AuditEvent: Sendable, Equatable, Codable {
    public var id: UUIDValue
    public var at: UnixTime
    public var kind: AuditKind
    /// `cli`, `admin-api` or `relay`.
    public var actor: String
    public var deviceID: String?
    public var tokenID: Int64?
    public var remoteAddress: String?
    /// A JSON object with event-specific fields.
    public var details: JSONValue

    private enum CodingKeys: String, CodingKey {
        case id, at = "at_us", kind, actor, deviceID = "device_id", tokenID = "token_id", remoteAddress = "remote_addr", details
    }

    public init(id: UUIDValue, at: UnixTime, kind: AuditKind, actor: String, deviceID: String? = nil,
                tokenID: Int64? = nil, remoteAddress: String? = nil, details: JSONValue = .object([])) {
        self.id = id
        self.at = at
        self.kind = kind
        self.actor = actor
        self.deviceID = deviceID
        self.tokenID = tokenID
        self.remoteAddress = remoteAddress
        self.details = details
    }
}
