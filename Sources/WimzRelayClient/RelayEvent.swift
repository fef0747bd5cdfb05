import Foundation
import WimzProtocol

/// What the app receives: the robot's events as the guide's models (`MissionProgress`,
/// `ModeChange`, …, see RobotModels.swift), the relay's `device_status`, and everything else
/// passed through raw. Each robot event keeps its `data` and the message as received.
public enum RelayEvent: Sendable, Equatable {
    /// The relay's view of the robot: online or not, since when (sent on connect and on every change).
    case deviceStatus(DeviceStatus)
    case missionProgress(RobotEvent<MissionProgress>)
    case modeChanged(RobotEvent<ModeChange>)
    case audioState(RobotEvent<AudioState>)
    case barkDetected(RobotEvent<BarkEvent>)
    case dogDetected(RobotEvent<DogEvent>)
    case treatDispensed(RobotEvent<TreatEvent>)
    case programProgress(RobotEvent<ProgramStatus>)
    /// An event this library has no model for: its name, its `data` and the message as received.
    case other(name: String, data: JSON, raw: String)
    /// A message that is not an event (WebRTC signalling from the robot, …), as received.
    case message(raw: String)
    /// A binary message from the robot, as received.
    case binary([UInt8])
    /// This client's own connection to the relay changed.
    case connection(ConnectionState)
}

/// One robot event: its model (nil when `data` did not decode as one, e.g. a field of another
/// type), the `data` object, the robot's timestamp and the whole message as received.
public struct RobotEvent<Model: Sendable & Equatable & Codable>: Sendable, Equatable {
    public var model: Model?
    public var data: JSON
    public var timestamp: String?
    public var raw: String
}

/// The client's connection to the relay.
public enum ConnectionState: Sendable, Equatable {
    case connecting
    case connected
    /// Waiting before the next attempt.
    case waiting(retryIn: Duration)
    /// Stopped for good: by ``RelayClient/stop()`` or because reconnecting cannot help.
    case stopped(RelayClientError)
}

extension ConnectionState: CustomStringConvertible {
    public var description: String {
        switch self {
        case .connecting: "connecting"
        case .connected: "connected"
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

    public init(deviceID: String, online: Bool, since: Date?, recovered: Bool? = nil) {
        self.deviceID = deviceID
        self.online = online
        self.since = since
        self.recovered = recovered
    }
}

extension RelayEvent {
    /// Reads a message from the relay that does not answer a command: an event, typed where this
    /// library has a model, or anything else as `.message`.
    init(message: JSON, raw text: String) {
        guard message["type"]?.stringValue == "event" else {
            self = .message(raw: text)
            return
        }
        self = RelayEvent.event(message, raw: text)
    }

    private static func event(_ message: JSON, raw text: String) -> RelayEvent {
        let name = message["event"]?.stringValue ?? ""
        let data = message["data"] ?? .null
        func robotEvent<M>(_: M.Type) -> RobotEvent<M> {
            // From the message as received, so numbers keep their exact text.
            RobotEvent(model: try? JSONDecoder().decode(EventData<M>.self, from: Data(text.utf8)).data, data: data,
                       timestamp: message["timestamp"]?.stringValue, raw: text)
        }
        switch name {
        case WimzProtocol.RelayEventName.deviceStatus:
            let since = data["since"]?.stringValue.flatMap { ISO8601DateFormatter().date(from: $0) }
            return .deviceStatus(DeviceStatus(deviceID: data["device_id"]?.stringValue ?? "",
                                              online: data["online"]?.boolValue ?? false, since: since,
                                              recovered: data["recovered"]?.boolValue))
        case "mission_progress": return .missionProgress(robotEvent(MissionProgress.self))
        case "mode_changed": return .modeChanged(robotEvent(ModeChange.self))
        case "audio_state": return .audioState(robotEvent(AudioState.self))
        case "bark_detected": return .barkDetected(robotEvent(BarkEvent.self))
        case "dog_detected": return .dogDetected(robotEvent(DogEvent.self))
        case "treat_dispensed": return .treatDispensed(robotEvent(TreatEvent.self))
        case "program_progress": return .programProgress(robotEvent(ProgramStatus.self))
        default: return .other(name: name, data: data, raw: text)
        }
    }
}

/// An event message's `data` member, decoded as `M`.
private struct EventData<M: Decodable>: Decodable {
    let data: M
}
