/// Every error code the relay answers with (docs/protocol.md "Frames on the sockets"): the `error` of an HTTP error
/// body `{"error":CODE,"message":TEXT}` with its status, or the `error` of a WebSocket `error`
/// frame. Server, Swift client and (through `protocol-constants.json`) the Python library use
/// this one list.
public enum ErrorCode: String, Sendable, CaseIterable, Codable, Error {
    // Credentials: HTTP routes and WebSocket upgrades alike.
    case missingToken = "missing_token"
    case unknownToken = "unknown_token"
    case expiredToken = "expired_token"
    case revokedToken = "revoked_token"
    case wrongDevice = "wrong_device"
    case wrongRole = "wrong_role"
    case deviceDisabled = "device_disabled"
    case storeUnavailable = "store_unavailable"
    case rateLimited = "rate_limited"

    // Requests.
    case badRequest = "bad_request"
    case invalidJSON = "invalid_json"
    case upgradeRequired = "upgrade_required"
    case notFound = "not_found"
    case invalidCode = "invalid_code"
    case methodNotAllowed = "method_not_allowed"
    case conflict
    case tooManyRegistrations = "too_many_registrations"
    /// v1.4: a fifth Live Activity of one app token and device.
    case tooManyActivities = "too_many_activities"
    /// v1.3: an owner's 21st pending invite.
    case tooManyInvites = "too_many_invites"
    /// v1.3: the device's last owner can't be downgraded or removed.
    case lastOwner = "last_owner"
    /// v1.3: an invite's or member's `until` in the past, malformed, or over 30 days ahead for a guest.
    case invalidUntil = "invalid_until"
    /// v1.5: the calling app's key has no package in that epoch (it is not in the roster).
    case notInRoster = "not_in_roster"
    /// v1.5: the device is sealed, and this would bypass the seal (an unsealed frame, plain HTTP
    /// to the robot's API).
    case sealedDevice = "sealed_device"
    /// v1.3: the caller's access level does not allow this (HTTP 403, or an app's command frame).
    case forbidden
    /// v1.6: a settings write named a version that is no longer the desired one (412, with it).
    case versionConflict = "version_conflict"
    /// v1.6: a settings write without `If-Match` (428).
    case preconditionRequired = "precondition_required"
    /// v1.6: a settings document that is not a JSON object (400).
    case invalidSettings = "invalid_settings"
    /// v1.6: a timeline cursor that is malformed, another device's, or both `before` and `after` (400).
    case invalidCursor = "invalid_cursor"
    /// v1.6: a timeline page's `limit` that is empty, not a number or not 1–500 (400).
    case invalidLimit = "invalid_limit"
    /// v1.6: a timeline retention that is not a whole number of days within the relay's ceiling (400).
    case invalidDays = "invalid_days"
    /// v1.6: a sealed history grant that is malformed, not signed by an owner of the current
    /// roster, or for someone who is not a family member of it (400).
    case invalidGrant = "invalid_grant"
    case lengthRequired = "length_required"
    case tooLarge = "too_large"
    case uriTooLong = "uri_too_long"
    case headersTooLarge = "headers_too_large"
    case tooManyConnections = "too_many_connections"
    case tooManyRequests = "too_many_requests"
    case internalError = "internal_error"
    case notSupported = "not_supported"
    case pushNotConfigured = "push_not_configured"
    case busy
    case deviceOffline = "device_offline"
    case shuttingDown = "shutting_down"
    case turnUnavailable = "turn_unavailable"
    case httpVersionNotSupported = "http_version_not_supported"

    // HTTP to the robot: the relay's own answers when the robot's cannot be given.
    case robotTimeout = "robot_timeout"
    case responseTooLarge = "response_too_large"
    case robotDisconnected = "robot_disconnected"
    case badRobotResponse = "bad_robot_response"

    // WebSocket `error` frames only (an app's message that was not forwarded).
    case badMessage = "bad_message"
    case forbiddenType = "forbidden_type"
    case robotBusy = "robot_busy"

    /// The HTTP status of this code (for codes of WebSocket frames only: the status their
    /// refusal would have over HTTP).
    public var httpStatus: Int {
        switch self {
        case .missingToken, .unknownToken, .expiredToken, .revokedToken: 401
        case .wrongDevice, .wrongRole, .deviceDisabled, .forbidden: 403
        case .badRequest, .invalidJSON, .upgradeRequired, .badMessage, .forbiddenType, .invalidUntil, .invalidSettings, .invalidCursor, .invalidLimit,
             .invalidDays, .invalidGrant: 400
        case .notFound, .invalidCode, .notInRoster: 404
        case .methodNotAllowed: 405
        case .conflict, .tooManyRegistrations, .tooManyActivities, .tooManyInvites, .lastOwner, .sealedDevice: 409
        case .lengthRequired: 411
        case .versionConflict: 412
        case .tooLarge: 413
        case .uriTooLong: 414
        case .preconditionRequired: 428
        case .headersTooLarge: 431
        case .rateLimited, .tooManyConnections, .tooManyRequests, .robotBusy: 429
        case .internalError: 500
        case .notSupported, .pushNotConfigured: 501
        case .responseTooLarge, .robotDisconnected, .badRobotResponse: 502
        case .storeUnavailable, .busy, .deviceOffline, .shuttingDown, .turnUnavailable: 503
        case .robotTimeout: 504
        case .httpVersionNotSupported: 505
        }
    }
}
