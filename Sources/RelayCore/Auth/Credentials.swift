/// What the relay decides with, as the store hands it over: token entries for the token cache,
/// TURN secrets and issuances. Plain values, here so the server needs no database types.

/// What the relay needs to decide on a presented token, without the database in the loop.
public struct CredentialEntry: Sendable, Equatable {
    public var token: TokenCredential
    public var deviceDisabled: Bool

    public init(token: TokenCredential, deviceDisabled: Bool) {
        self.token = token
        self.deviceDisabled = deviceDisabled
    }
}

/// A token as its checks read it: whose it is, what it allows and until when — no label, no
/// creation or last-use time (a listing's `TokenRecord` has those). What a cold node's lookup
/// reads from the store and what the relay's cache gives back.
public struct TokenCredential: Sendable, Equatable {
    public var id: Int64
    public var deviceID: DeviceID
    public var role: Role
    /// SHA-256 of the secret: the cache's key.
    public var digest: DigestKey
    public var expiresAt: UnixTime?
    public var revokedAt: UnixTime?
    public var access: Access
    public var control: Bool

    public init(id: Int64, deviceID: DeviceID, role: Role, digest: DigestKey, expiresAt: UnixTime?, revokedAt: UnixTime?,
                access: Access, control: Bool) {
        self.id = id
        self.deviceID = deviceID
        self.role = role
        self.digest = digest
        self.expiresAt = expiresAt
        self.revokedAt = revokedAt
        self.access = access
        self.control = control
    }

    /// What the token's holder may do.
    public var rights: MemberRights { MemberRights(access: access, control: control) }

    /// A member's `until` (docs/protocol.md v1.3): the token's expiry.
    public var until: UnixTime? { expiresAt }

    /// `"token_id"`, `"access"`, `"control"`, `"until"`: how an answer states the caller's own access.
    public var memberFields: [(String, JSONValue)] { [("token_id", .int(id))] + rights.fields(until: until) }
}

extension CredentialEntry: CredentialState {
    public var deviceID: DeviceID { token.deviceID }
    public var role: Role { token.role }
    public var expiresAt: UnixTime? { token.expiresAt }
    public var revokedAt: UnixTime? { token.revokedAt }
}

extension TokenRecord {
    /// What the checks read of it; nil when its digest is not a SHA-256 digest (no token's).
    public var credential: TokenCredential? {
        DigestKey(exactly: digest).map {
            TokenCredential(id: id, deviceID: deviceID, role: role, digest: $0, expiresAt: expiresAt, revokedAt: revokedAt,
                            access: access, control: control)
        }
    }
}

/// A TURN shared secret as stored in coturn's `turn_secret(realm, value)` table.
public struct TurnSecret: Sendable, Equatable {
    public var id: Int64
    public var realm: String
    public var value: String
    public var createdAt: UnixTime

    public init(id: Int64, realm: String, value: String, createdAt: UnixTime) {
        self.id = id
        self.realm = realm
        self.value = value
        self.createdAt = createdAt
    }

    /// For listings: never the whole secret.
    public var masked: String { value.count <= 8 ? "****" : String(value.prefix(4)) + "…" + String(value.suffix(2)) }
}

/// One TURN credential handed out. `Codable` as it waits in the audit spool.
public struct TurnIssuance: Sendable, Equatable, Codable {
    /// The id of the issuance's audit event (a UUID): replays store the row once.
    public var id: String?
    public var deviceID: DeviceID
    public var tokenID: Int64?
    public var role: Role
    public var userID: String
    public var username: String
    public var secretID: Int64?
    public var issuedAt: UnixTime
    public var expiresAt: UnixTime
    public var clientAddress: String?
    /// `http` or `push`.
    public var via: String

    private enum CodingKeys: String, CodingKey {
        case id, deviceID = "device_id", tokenID = "token_id", role, userID = "user_id", username, secretID = "secret_id",
             issuedAt = "issued_at_us", expiresAt = "expires_at_us", clientAddress = "client_addr", via
    }

    public init(id: String? = nil, deviceID: DeviceID, tokenID: Int64?, role: Role, userID: String, username: String,
                secretID: Int64?, issuedAt: UnixTime, expiresAt: UnixTime, clientAddress: String?, via: String) {
        self.id = id
        self.deviceID = deviceID
        self.tokenID = tokenID
        self.role = role
        self.userID = userID
        self.username = username
        self.secretID = secretID
        self.issuedAt = issuedAt
        self.expiresAt = expiresAt
        self.clientAddress = clientAddress
        self.via = via
    }
}
