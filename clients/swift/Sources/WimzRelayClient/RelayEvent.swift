import Foundation
import WimzProtocol
import WimzSealed

/// What the app receives: the relay's `device_status`, every event the robot sends (its name,
/// `data` and the message as received; the robot's own product, WimzRobot, types them as the
/// guide's models), anything else passed through raw, and this client's own connection state.
public enum RelayEvent: Sendable, Equatable {
    /// The relay's view of the robot: online or not, since when (sent on connect and on every change).
    case deviceStatus(DeviceStatus)
    /// An event from the robot.
    case event(EventMessage)
    /// A message that is not an event (WebRTC signalling from the robot, …), as received.
    case message(raw: String)
    /// A binary message from the robot, as received.
    case binary([UInt8])
    /// This client's own connection to the relay changed.
    case connection(ConnectionState)
    /// A frame of a sealed device dropped unread (v1.5): changed on the way, replayed, of an
    /// epoch this app does not hold, not from the robot, or unsealed where only sealed ones count.
    case sealedFrameRejected(FrameRejection)
    /// An owner's history grant (v1.6) dropped unopened: not signed by an owner of a roster this
    /// app holds, another member's or device's, or a package that does not open.
    case sealedHistoryRejected(SealedError)
    /// The robot's settings changed (v1.6): the desired version and the one the robot reported
    /// (nil: none yet). Read them with ``RelayClient/settings()``.
    case settingsChanged(desiredVersion: Int64?, reportedVersion: Int64?)
    /// New entries of the household's timeline were stored (v1.6): the newest this member may
    /// see. ``TimelineCopy/sync()`` pulls them.
    case timelineChanged(newest: String)
}

/// One event message: its name, its `data` object, the robot's timestamp and the message as
/// received.
public struct EventMessage: Sendable, Equatable {
    public var name: String
    public var data: JSON
    public var timestamp: String?
    public var raw: String
    /// On a sealed device (v1.5): when the robot sealed it (ms since 1970) and whether it is past
    /// state (older than 120 s, or than an event of the same kind already shown): show it "as of",
    /// never as a fresh alert. `raw` is then the opened frame.
    public var sealedAt: Int64?
    public var isPastState = false

    public init(name: String, data: JSON, timestamp: String?, raw: String) {
        self.name = name
        self.data = data
        self.timestamp = timestamp
        self.raw = raw
    }
}

/// The client's connection to the relay.
public enum ConnectionState: Sendable, Equatable {
    case connecting
    case connected
    /// Waiting before the next attempt.
    case waiting(retryIn: Duration)
    /// The app is in the background: no socket until it returns (``RelayClient/enterBackground()``).
    case suspended
    /// Stopped for good: by ``RelayClient/stop()`` or because reconnecting cannot help.
    case stopped(RelayClientError)
}

extension ConnectionState: CustomStringConvertible {
    public var description: String {
        switch self {
        case .connecting: "connecting"
        case .connected: "connected"
        case .suspended: "in the background"
        case .waiting(let delay): "retrying in \(delay.formatted(.units(allowed: [.seconds, .milliseconds], width: .narrow)))"
        case .stopped(.stopped): "stopped"
        case .stopped(let reason): "stopped (\(reason))"
        }
    }
}

public struct DeviceStatus: Sendable, Equatable {
    public var deviceID: String
    public var online: Bool
    public var since: Date?
    /// After a reconnect with missed-event recovery: true when every missed event followed,
    /// false when some were lost (refetch state through the robot's API then); nil otherwise.
    public var recovered: Bool?
    /// This app's own access, in the greeting of each connection (v1.3).
    public var member: MemberAccess?

    public init(deviceID: String, online: Bool, since: Date?, recovered: Bool? = nil, member: MemberAccess? = nil) {
        self.deviceID = deviceID
        self.online = online
        self.since = since
        self.recovered = recovered
        self.member = member
    }
}

extension RelayEvent {
    /// A message from the relay as text (an event kept elsewhere, a test's message).
    public init(text: String) throws {
        self.init(message: try JSON(parsing: text), raw: text)
    }

    /// Reads a message from the relay that does not answer a command: an event, typed where this
    /// library has a model, or anything else as `.message`.
    init(message: JSON, raw text: String) {
        if message["type"]?.stringValue == WimzProtocol.MessageType.settingsChanged {
            self = .settingsChanged(desiredVersion: message["desired_version"]?.int64Value,
                                    reportedVersion: message["reported_version"]?.int64Value)
            return
        }
        if message["type"]?.stringValue == WimzProtocol.MessageType.timeline, let newest = message["newest"]?.stringValue {
            self = .timelineChanged(newest: newest)
            return
        }
        guard message["type"]?.stringValue == "event" else {
            self = .message(raw: text)
            return
        }
        self = RelayEvent.event(message, raw: text)
    }

    private static func event(_ message: JSON, raw text: String) -> RelayEvent {
        let name = message["event"]?.stringValue ?? ""
        let data = message["data"] ?? .null
        guard name == WimzProtocol.RelayEventName.deviceStatus else {
            return .event(EventMessage(name: name, data: data, timestamp: message["timestamp"]?.stringValue, raw: text))
        }
        return .deviceStatus(DeviceStatus(deviceID: data["device_id"]?.stringValue ?? "", online: data["online"]?.boolValue ?? false,
                                          since: data["since"]?.stringValue.flatMap(ISO8601.date),
                                          recovered: data["recovered"]?.boolValue, member: MemberAccess(data["member"])))
    }
}

/// The one reader of the relay's times (`2026-11-22T06:00:00Z`, fractions of a second allowed).
enum ISO8601 {
    static func date(_ text: String) -> Date? {
        (try? Date(text, strategy: .iso8601)) ?? (try? Date(text, strategy: Date.ISO8601FormatStyle(includingFractionalSeconds: true)))
    }
}
