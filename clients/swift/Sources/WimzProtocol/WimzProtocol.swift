/// What every end of the WIM-Z relay protocol must agree on (docs/protocol.md), in one place without
/// dependencies: the daemon (RelayCore), the app library (WimzRelayClient) and — through
/// `wimz-relay protocol-constants`, which prints ``WimzProtocol/constantsJSON`` — the robot
/// library's tests, which check their Python constants against it.

/// What a phone can be woken for (docs/protocol.md v1.2 "Push notifications"): the kind, the robot
/// event that causes it, and the alert's localisation key (the app ships the texts).
public enum PushKind: String, Sendable, CaseIterable, Codable {
    case barkDetected = "bark_detected"
    case dogDetected = "dog_detected"
    case treatDispensed = "treat_dispensed"
    /// `mission_progress` with `data.status` = `completed`.
    case missionCompleted = "mission_completed"
    /// Sent by the relay: the robot has been gone for `WIMZ_PUSH_OFFLINE_AFTER` seconds.
    case robotOffline = "robot_offline"

    /// `aps.alert.loc-key`.
    public var locKey: String { "WIMZ_" + rawValue.uppercased() }

    /// The robot event behind this kind (nil: the relay's own).
    public var robotEvent: String? {
        switch self {
        case .barkDetected, .dogDetected, .treatDispensed: rawValue
        case .missionCompleted: "mission_progress"
        case .robotOffline: nil
        }
    }

    /// The members of the event's `data` that become `loc-args`, in order.
    public var locArgFields: [String] {
        switch self {
        case .barkDetected, .dogDetected: ["dog_name"]
        case .treatDispensed: ["dog_name", "daily_count", "daily_limit"]
        case .missionCompleted: ["dog_name", "trick"]
        case .robotOffline: []
        }
    }
}

/// WebSocket close codes (docs/protocol.md "Keepalive, limits and close codes") and what a client does after each.
public enum CloseCode: UInt16, Sendable, CaseIterable {
    case normal = 1000
    /// The relay is shutting down.
    case goingAway = 1001
    /// A text frame that is not valid UTF-8 (RFC 6455 §8.1).
    case invalidPayload = 1007
    case tooLarge = 1009
    /// This node is draining or the device moved to another node: reconnect at once.
    case reconnectNow = 1012
    /// A newer robot socket took this device over.
    case replaced = 4001
    /// The token was revoked or the device disabled.
    case revoked = 4003
    case slowConsumer = 4008
    case rateLimited = 4029

    /// How a client reconnects after this close.
    public enum Reconnect: String, Sendable {
        /// At once (through the same URL): the balancer picks a live node. Only after a
        /// connection that lasted ``WimzProtocol/quickReconnectAfterSeconds``; a node that keeps
        /// closing fresh sockets gets the back-off instead.
        case atOnce = "at_once"
        /// Capped exponential back-off with full jitter.
        case backoff
        /// The back-off with a floor: the relay asked the client to slow down.
        case slowBackoff = "slow_backoff"
        /// Never for an app; a robot stops too after `replaced` (another robot has the device).
        case never
    }

    public var reconnect: Reconnect {
        switch self {
        case .goingAway, .reconnectNow: .atOnce
        case .slowConsumer, .rateLimited: .slowBackoff
        case .revoked, .replaced: .never
        case .normal, .invalidPayload, .tooLarge: .backoff
        }
    }

    /// What reconnecting after `code` means, for codes this enum does not know too.
    public static func reconnect(after code: UInt16?) -> Reconnect {
        code.flatMap(CloseCode.init(rawValue:))?.reconnect ?? .backoff
    }
}

public enum WimzProtocol {
    /// The header every error answer of the relay carries its code in (the body's `error`): a
    /// client that is not handed a refused upgrade's body (URLSession) still learns why.
    public static let errorHeader = "Wimz-Error"

    /// Endpoint paths.
    public enum Path {
        public static let robotSocket = "/ws/robot"
        public static let appSocket = "/ws/app"
        public static let turnCredentials = "/api/turn/credentials"
        public static let pairing = "/api/pairing"
        /// `/api/devices/{device_id}/…`: one device's resources (`DeviceResource`).
        public static let devices = "/api/devices"

        /// What `/api/devices/{device_id}/` leads to (docs/protocol.md).
        public enum DeviceResource: String, CaseIterable, Sendable {
            case status, state, robot, push, invites, members
            /// v1.4: the Live Activity tokens an app hands over.
            case liveActivity = "live-activity"
            /// v1.5: the sealed household's keys, epochs and rosters.
            case sealed
            /// v1.6: the robot's settings, desired and reported.
            case settings
            /// v1.6: the household's timeline, its retention.
            case timeline
            case pairingCodes = "pairing-codes"
            case appTokens = "app-tokens"
        }

        /// `/api/devices/<device>/<resource>[/<segment>…]`: the path the clients call. A device id
        /// is `[A-Za-z0-9_.-]` (nothing to escape); further segments go as given.
        public static func device(_ device: String, _ resource: DeviceResource, _ segments: [String] = []) -> String {
            ([devices, device, resource.rawValue] + segments).joined(separator: "/")
        }

        /// The same as a route pattern, as the relay's route table and docs/openapi.json write it
        /// (`/api/devices/{device_id}/members/{token_id}`).
        public static func devicePattern(_ resource: DeviceResource, _ segments: [String] = []) -> String {
            ([devices, "{device_id}", resource.rawValue] + segments).joined(separator: "/")
        }
    }

    /// The `type` of a frame.
    public enum MessageType {
        public static let event = "event"
        public static let command = "command"
        public static let response = "response"
        public static let error = "error"
        /// The relay's HTTP request on the robot leg, and the robot's answer (v1.1).
        public static let httpRequest = "http_request"
        public static let httpResponse = "http_response"
        public static let httpBody = "http_body"
        /// v1.6: the relay hands the robot the desired settings, the robot says what it applied,
        /// apps hear that either changed, and that the household's timeline has new entries.
        public static let settings = "settings"
        public static let settingsApplied = "settings_applied"
        public static let settingsChanged = "settings_changed"
        public static let timeline = "timeline"
    }

    /// Relay-originated event names.
    public enum RelayEventName {
        public static let deviceStatus = "device_status"
        public static let appPresence = "app_presence"
        public static let turnCredentials = "turn_credentials"
    }

    /// Names only the relay speaks (docs/protocol.md v1.2 "Frames on the sockets"): an app frame whose
    /// `type` is one of them, or whose `type` is `event` and whose `event` is one of them, is
    /// refused with `forbidden_type`.
    public static let relayOnlyNames: [String] = [
        MessageType.httpRequest, MessageType.httpResponse, MessageType.httpBody, RelayEventName.deviceStatus,
        RelayEventName.appPresence, RelayEventName.turnCredentials, MessageType.error,
        MessageType.settings, MessageType.settingsApplied, MessageType.settingsChanged, MessageType.timeline,
    ]

    /// Events the relay replays to apps that connect later, by default.
    public static let replayedEvents: Set<String> = ["mode_changed", "mission_progress", "audio_state", "program_progress"]

    /// Limits a client must know (the relay's defaults; operators can change the first four).
    public static let defaultMaxMessageBytes = 64 * 1024
    public static let defaultPingIntervalSeconds = 20
    public static let defaultRobotHTTPMaxBody = 1 << 20
    public static let defaultRecoveryMessages = 256
    /// After a close that says "reconnect at once", only a connection that lasted this long
    /// reconnects without the back-off.
    public static let quickReconnectAfterSeconds = 2.0
    /// Body bytes per `http_response`/`http_body` frame a robot should send, well under the
    /// message limit once base64-encoded.
    public static let robotHTTPChunkBytes = 32 * 1024
    /// The longest chain of a sealed household's departures signed ahead (v1.5) that a robot
    /// keeps, and that the relay takes with a roster.
    public static let maxScheduledDepartures = 32

    /// Everything above, error codes (with their HTTP status) and push kinds as JSON (keys
    /// sorted): `wimz-relay protocol-constants` prints it, and the robot library ships it as
    /// `wimz_robot/protocol-constants.json` (WimzProtocolTests keeps the two equal).
    public static var constantsJSON: String {
        let codes = CloseCode.allCases.map { #""\#($0)":{"code":\#($0.rawValue),"reconnect":"\#($0.reconnect.rawValue)"}"# }
        let replayed = replayedEvents.sorted().map { #""\#($0)""# }
        let errors = ErrorCode.allCases.map(\.rawValue).sorted().map { #""\#($0)":\#(ErrorCode(rawValue: $0)!.httpStatus)"# }
        let pushKinds = PushKind.allCases.map(\.rawValue).sorted().map { #""\#($0)""# }
        let resources = Path.DeviceResource.allCases.map { (String($0.rawValue.map { $0 == "-" ? "_" : $0 }), $0.rawValue) }
            .sorted { $0.0 < $1.0 }.map { #""\#($0.0)":"\#($0.1)""# }
        return "{"
            + #""close_codes":{\#(codes.joined(separator: ","))},"#
            + #""limits":{"max_message_bytes":\#(defaultMaxMessageBytes),"ping_interval_seconds":\#(defaultPingIntervalSeconds),"#
            + #""quick_reconnect_after_seconds":\#(quickReconnectAfterSeconds),"recovery_messages":\#(defaultRecoveryMessages),"#
            + #""robot_http_chunk_bytes":\#(robotHTTPChunkBytes),"robot_http_max_body":\#(defaultRobotHTTPMaxBody),"#
            + #""scheduled_departures":\#(maxScheduledDepartures)},"#
            + #""message_types":["\#([MessageType.command, MessageType.error, MessageType.event, MessageType.httpBody, MessageType.httpRequest, MessageType.httpResponse, MessageType.response].joined(separator: #"",""#))"],"#
            + #""paths":{"app_socket":"\#(Path.appSocket)","device":"\#(Path.devices)/{device_id}","#
            + #""device_resources":{\#(resources.joined(separator: ","))},"pairing":"\#(Path.pairing)","#
            + #""robot_socket":"\#(Path.robotSocket)","turn_credentials":"\#(Path.turnCredentials)"},"#
            + #""error_codes":{\#(errors.joined(separator: ","))},"#
            + #""push_kinds":[\#(pushKinds.joined(separator: ","))],"#
            + #""relay_events":["\#(RelayEventName.appPresence)","\#(RelayEventName.deviceStatus)","\#(RelayEventName.turnCredentials)"],"#
            + #""replayed_events":[\#(replayed.joined(separator: ","))]"#
            + "}"
    }
}
