import Foundation
import WimzProtocol
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

/// Why a call failed or why the client stopped.
public enum RelayClientError: Error, Sendable, Equatable {
    /// The token was refused (HTTP 401): missing, unknown, expired or revoked. The client stops.
    case unauthorized(code: String, message: String)
    /// The token belongs to another device or role, or the device is disabled (HTTP 403): the
    /// client stops. Or (code `forbidden`) this member's access does not allow the call: a
    /// guest's command or change through the robot's API, household calls above its level.
    case forbidden(code: String, message: String)
    /// The token was revoked or the device disabled while connected (close 4003). The client stops.
    case revoked(reason: String)
    /// The robot is not connected to the relay: the command was not delivered.
    case deviceOffline(message: String)
    /// Over the relay's per-app message rate: the command was dropped.
    case rateLimited(message: String)
    /// The robot's connection is not keeping up (docs/protocol.md v1.2 `robot_busy`): the command was
    /// dropped; retry shortly.
    case robotBusy(message: String)
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
    /// The robot answered a typed command (``RobotCommand``) with `ok` false: its own error
    /// `code` (nil without one) and message.
    case commandFailed(code: String?, message: String)
}

extension RelayClientError {
    /// The relay's error code, typed (`WimzProtocol.ErrorCode`: the same list the relay answers
    /// with), for refusals that carry one; nil for the rest and for a code that is not the relay's
    /// (the robot's own API answering through the relay).
    public var errorCode: ErrorCode? {
        switch self {
        case .unauthorized(let code, _), .forbidden(let code, _), .http(_, let code, _): return ErrorCode(rawValue: code)
        case .deviceOffline: return .deviceOffline
        case .rateLimited: return .rateLimited
        case .robotBusy: return .robotBusy
        case .revoked, .timeout, .notConnected, .stopped, .invalidResponse, .commandFailed: return nil
        }
    }

    /// The relay's (or the robot's) refusal of an HTTP request, from its status and JSON body
    /// `{"error":CODE,"message":TEXT}`: 401 and 403 typed, anything else ``http(status:code:message:)``.
    /// `errorHeader`: the answer's `Wimz-Error`, which names the code when the body is not at hand.
    public static func refusal(status: Int, body: Data, errorHeader: String? = nil) -> RelayClientError {
        let json = (try? JSON(parsing: String(decoding: body, as: UTF8.self))) ?? .null
        let code = json["error"]?.stringValue ?? errorHeader ?? "http_\(status)"
        let message = json["message"]?.stringValue ?? json["error"]?.stringValue ?? errorHeader
            ?? HTTPURLResponse.localizedString(forStatusCode: status)
        switch status {
        case 401: return .unauthorized(code: code, message: message)
        case 403: return .forbidden(code: code, message: message)
        default: return .http(status: status, code: code, message: message)
        }
    }
}


extension RelayClientError {
    /// A command's refusal by the relay, from its error frame `{"type":"error","code":CODE,"id":ID,"message":TEXT}`.
    static func commandRefusal(_ frame: JSON) -> RelayClientError {
        let text = frame["message"]?.stringValue ?? ""
        switch frame["code"]?.stringValue.flatMap(ErrorCode.init(rawValue:)) {
        case .deviceOffline?: return .deviceOffline(message: text)
        case .rateLimited?: return .rateLimited(message: text)
        case .robotBusy?: return .robotBusy(message: text)
        case .forbidden?: return .forbidden(code: ErrorCode.forbidden.rawValue, message: text)
        default: return .invalidResponse(text)
        }
    }
}
