/// A device as the store knows it.
public struct DeviceRecord: Sendable, Equatable {
    public var id: DeviceID
    public var name: String
    public var createdAt: UnixTime
    public var disabledAt: UnixTime?

    public init(id: DeviceID, name: String, createdAt: UnixTime, disabledAt: UnixTime?) {
        self.id = id
        self.name = name
        self.createdAt = createdAt
        self.disabledAt = disabledAt
    }

    public var isDisabled: Bool { disabledAt != nil }
}

/// A bearer token's metadata. The secret itself is never kept; `digest` is its SHA-256.
public struct TokenRecord: Sendable, Equatable {
    public var id: Int64
    public var deviceID: DeviceID
    public var role: Role
    public var label: String
    public var digest: [UInt8]
    public var createdAt: UnixTime
    public var expiresAt: UnixTime?
    public var revokedAt: UnixTime?
    public var lastUsedAt: UnixTime?
    /// v1.3: the member's access level (robot tokens: `owner`).
    public var access: Access
    /// v1.3: a guest's control grant (stored false for owners and family, who always have it).
    public var control: Bool

    public init(id: Int64, deviceID: DeviceID, role: Role, label: String, digest: [UInt8], createdAt: UnixTime,
                expiresAt: UnixTime?, revokedAt: UnixTime?, lastUsedAt: UnixTime?, access: Access = .owner,
                control: Bool = false) {
        self.id = id
        self.deviceID = deviceID
        self.role = role
        self.label = label
        self.digest = digest
        self.createdAt = createdAt
        self.expiresAt = expiresAt
        self.revokedAt = revokedAt
        self.lastUsedAt = lastUsedAt
        self.access = access
        self.control = control
    }

    /// What the token's holder may do.
    public var rights: MemberRights { MemberRights(access: access, control: control) }

    /// A member's `until` (docs/protocol.md v1.3): the token's expiry. One time ends a token, so
    /// "at until the token expires as any expired token does" holds by construction.
    public var until: UnixTime? { expiresAt }

    /// `"token_id"`, `"label"` (when `labelled`), `"access"`, `"control"`, `"until"`: how answers
    /// and audit rows state a member (the members list, a change's before and after, an app's own access).
    public func memberFields(labelled: Bool) -> [(String, JSONValue)] {
        [("token_id", .int(id))] + (labelled ? [("label", .string(label))] : []) + rights.fields(until: until)
    }

    public func isExpired(at now: UnixTime) -> Bool {
        if let expiresAt { return expiresAt <= now }
        return false
    }
}

/// Why a presented token was not accepted: one of the protocol's credential codes
/// (`missing_token` … `rate_limited`, and `bad_request` for a malformed upgrade). Also the
/// `reason` of `auth_failed` audit events and of the auth-failure metrics.
public typealias AuthFailure = ErrorCode
