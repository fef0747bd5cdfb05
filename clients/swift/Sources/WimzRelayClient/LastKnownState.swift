import Foundation
import WimzProtocol
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

/// What the robot last said, kept by the relay while the robot is offline (docs/protocol.md v1.2,
/// `GET /api/devices/{device_id}/state`): the latest of each replayed event as the live stream
/// delivers it, and when the robot was last connected.
public struct LastKnownState: Sendable, Equatable {
    /// One kept event and when the relay received it.
    public struct KnownEvent: Sendable, Equatable {
        public var message: EventMessage
        public var receivedAt: Date?
    }

    public var deviceID: String
    public var online: Bool
    /// When the robot was last connected (now, while it is); nil: never seen.
    public var lastSeen: Date?
    /// By event name (`mode_changed`, `mission_progress`, `audio_state`, `program_progress`).
    public var events: [String: KnownEvent]

    /// Reads the endpoint's body.
    public static func decode(_ data: Data) throws -> LastKnownState {
        let text = String(decoding: data, as: UTF8.self)
        let body = try JSON(parsing: text)
        guard let deviceID = body["device_id"]?.stringValue, let online = body["online"]?.boolValue else {
            throw RelayClientError.invalidResponse("state: device_id and online are required")
        }
        var events: [String: KnownEvent] = [:]
        if case .object(let members)? = body["events"] {
            for (name, entry) in members {
                guard let message = entry["message"], case .object = message else { continue }
                events[name] = KnownEvent(message: EventMessage(name: name, data: message["data"] ?? .null,
                                                                timestamp: message["timestamp"]?.stringValue, raw: message.text),
                                          receivedAt: entry["received_at"]?.stringValue.flatMap(ISO8601.date))
            }
        }
        return LastKnownState(deviceID: deviceID, online: online,
                              lastSeen: body["last_seen"]?.stringValue.flatMap(ISO8601.date), events: events)
    }
}

extension RelayClient {
    /// What the robot last said (its latest mode, mission progress, audio and program state)
    /// and when it was last connected — also while it is offline (`GET /api/devices/ID/state`).
    /// On a sealed device the relay keeps the robot's sealed frames: they are opened here (as
    /// past state when older than 120 s), and one that does not open is left out and reported
    /// as ``RelayEvent/sealedFrameRejected(_:)``.
    public func lastKnownState() async throws -> LastKnownState {
        opened(try await fetchLastKnownState(base: httpBase, device: configuration.deviceID, token: currentToken,
                                             session: configuration.urlSession, retry: requestRetry))
    }
}

/// `GET {base}/api/devices/{device}/state` with the bearer token.
func fetchLastKnownState(base: URL, device: String, token: String, session: URLSession,
                         retry: RequestRetry) async throws -> LastKnownState {
    let url = relayURL(base, WimzProtocol.Path.device(device, .state))
    return try LastKnownState.decode(try await relayCall(URLRequest(url: url), token: token, session: session, retry: retry))
}
