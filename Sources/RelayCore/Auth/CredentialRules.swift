/// The rules a token must pass, in the order the contract lists its failures.
/// Shared by the store's direct check and the relay's in-memory credential table. Inlinable:
/// specialised where it is called (every handshake), so no generic `Result` has its type
/// metadata built at run time.
public enum CredentialRules {
    /// Revoked, expired or disabled-device tokens fail; device and role are checked by `authorize`.
    @inlinable public static func check<Entry: CredentialState>(_ entry: Entry, at now: UnixTime) -> Result<Entry, AuthFailure> {
        if entry.revokedAt != nil { return .failure(.revokedToken) }
        if let expires = entry.expiresAt, expires <= now { return .failure(.expiredToken) }
        if entry.deviceDisabled { return .failure(.deviceDisabled) }
        return .success(entry)
    }

    /// `check`, then the token must belong to `device` and carry `role`
    /// (docs/protocol.md: 401 for unknown/expired, 403 for another device or role, or disabled).
    @inlinable public static func authorize<Entry: CredentialState>(_ entry: Entry, device: DeviceID, role: Role,
                                                         at now: UnixTime) -> Result<Entry, AuthFailure> {
        if entry.deviceID != device { return .failure(.wrongDevice) }
        if entry.role != role { return .failure(.wrongRole) }
        return check(entry, at: now)
    }
}

/// What `CredentialRules` reads of a token.
public protocol CredentialState {
    var deviceID: DeviceID { get }
    var role: Role { get }
    var expiresAt: UnixTime? { get }
    var revokedAt: UnixTime? { get }
    var deviceDisabled: Bool { get }
}


