import Foundation

/// What the app receives: the robot's events as typed models, the relay's `device_status`, and
/// everything else passed through raw. Robot payloads are read leniently: every field is
/// optional (a robot on older software may leave some out) and `data` keeps the whole object.
/// Field names are the robot's snake_case keys (`total_steps` → `totalSteps`).
public enum RelayEvent: Sendable, Equatable {
    /// The relay's view of the robot: online or not, since when (sent on connect and on every change).
    case deviceStatus(DeviceStatus)
    case missionProgress(Progress)
    case modeChanged(ModeChanged)
    case audioState(AudioState)
    case barkDetected(BarkDetected)
    case dogDetected(DogDetected)
    case treatDispensed(TreatDispensed)
    case programProgress(Progress)
    /// An event this library has no model for: its name, its `data` and the message as received.
    case other(name: String, data: JSON, raw: String)
    /// A message that is not an event (WebRTC signalling from the robot, …), as received.
    case message(raw: String)
    /// This client's own connection to the relay changed.
    case connection(ConnectionState)
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
}

/// `mission_progress` and `program_progress`: how far the robot is through a mission or program.
public struct Progress: Sendable, Equatable {
    /// The mission's (or program's) name: the `mission` (or `program`) key.
    public var name: String?
    public var step: Int?
    public var totalSteps: Int?
    /// 0…1 when the robot sends it.
    public var progress: Double?
    public var status: String?
    public var timestamp: String?
    public var data: JSON

    /// `progress`, or step/totalSteps when only those were sent.
    public var fraction: Double? {
        if let progress { return progress }
        if let step, let totalSteps, totalSteps > 0 { return Double(step) / Double(totalSteps) }
        return nil
    }

    init(name key: String, data: JSON, timestamp: String?) {
        name = data[key]?.stringValue
        step = data["step"]?.intValue
        totalSteps = data["total_steps"]?.intValue
        progress = data["progress"]?.doubleValue
        status = data["status"]?.stringValue
        self.timestamp = timestamp
        self.data = data
    }
}

public struct ModeChanged: Sendable, Equatable {
    public var mode: String?
    public var previousMode: String?
    public var timestamp: String?
    public var data: JSON
}

public struct AudioState: Sendable, Equatable {
    public var playing: Bool?
    public var track: String?
    public var volume: Double?
    public var timestamp: String?
    public var data: JSON
}

public struct BarkDetected: Sendable, Equatable {
    public var confidence: Double?
    public var loudness: Double?
    public var timestamp: String?
    public var data: JSON
}

public struct DogDetected: Sendable, Equatable {
    public var confidence: Double?
    public var label: String?
    public var timestamp: String?
    public var data: JSON
}

public struct TreatDispensed: Sendable, Equatable {
    public var count: Int?
    public var remaining: Int?
    public var timestamp: String?
    public var data: JSON
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
        let time = message["timestamp"]?.stringValue
        switch name {
        case "device_status":
            let since = data["since"]?.stringValue.flatMap { ISO8601DateFormatter().date(from: $0) }
            return .deviceStatus(DeviceStatus(deviceID: data["device_id"]?.stringValue ?? "",
                                              online: data["online"]?.boolValue ?? false, since: since))
        case "mission_progress":
            return .missionProgress(Progress(name: "mission", data: data, timestamp: time))
        case "mode_changed":
            return .modeChanged(ModeChanged(mode: data["mode"]?.stringValue, previousMode: data["previous_mode"]?.stringValue,
                                            timestamp: time, data: data))
        case "audio_state":
            return .audioState(AudioState(playing: data["playing"]?.boolValue, track: data["track"]?.stringValue,
                                          volume: data["volume"]?.doubleValue, timestamp: time, data: data))
        case "bark_detected":
            return .barkDetected(BarkDetected(confidence: data["confidence"]?.doubleValue,
                                              loudness: data["loudness"]?.doubleValue, timestamp: time, data: data))
        case "dog_detected":
            return .dogDetected(DogDetected(confidence: data["confidence"]?.doubleValue, label: data["label"]?.stringValue,
                                            timestamp: time, data: data))
        case "treat_dispensed":
            return .treatDispensed(TreatDispensed(count: data["count"]?.intValue, remaining: data["remaining"]?.intValue,
                                                  timestamp: time, data: data))
        case "program_progress":
            return .programProgress(Progress(name: "program", data: data, timestamp: time))
        default:
            return .other(name: name, data: data, raw: text)
        }
    }
}
