/// Why a call failed or why the client stopped.
public enum RelayClientError: Error, Sendable, Equatable {
    /// The token was refused (HTTP 401): missing, unknown, expired or revoked. The client stops.
    case unauthorized(code: String, message: String)
    /// The token belongs to another device or role, or the device is disabled (HTTP 403). The client stops.
    case forbidden(code: String, message: String)
    /// The token was revoked or the device disabled while connected (close 4003). The client stops.
    case revoked(reason: String)
    /// The robot is not connected to the relay: the command was not delivered.
    case deviceOffline(message: String)
    /// Over the relay's per-app message rate: the command was dropped.
    case rateLimited(message: String)
    /// No response within the command's timeout.
    case timeout
    /// Not connected to the relay (or the connection was lost before the response came).
    case notConnected
    /// The client was stopped.
    case stopped
    /// The relay answered an HTTP request with an error (`{"error":CODE,"message":TEXT}`).
    case http(status: Int, code: String, message: String)
    /// The relay sent something this client cannot read.
    case invalidResponse(String)
}
