import Foundation
import WimzRelayClient

/// A robot event as the guide's models (`MissionProgress`, `ModeChange`, …): what
/// ``WimzRelayClient/RelayEvent/event(_:)`` carries, typed where this library has a model.
public enum RobotEvent: Sendable, Equatable {
    case missionProgress(TypedEvent<MissionProgress>)
    case modeChanged(TypedEvent<ModeChange>)
    case audioState(TypedEvent<AudioState>)
    case barkDetected(TypedEvent<BarkEvent>)
    case dogDetected(TypedEvent<DogEvent>)
    case treatDispensed(TypedEvent<TreatEvent>)
    case programProgress(TypedEvent<ProgramStatus>)
    /// An event this library has no model for.
    case other(EventMessage)

    /// `message` typed by its name.
    public init(_ message: EventMessage) {
        switch message.name {
        case "mission_progress": self = .missionProgress(TypedEvent(message))
        case "mode_changed": self = .modeChanged(TypedEvent(message))
        case "audio_state": self = .audioState(TypedEvent(message))
        case "bark_detected": self = .barkDetected(TypedEvent(message))
        case "dog_detected": self = .dogDetected(TypedEvent(message))
        case "treat_dispensed": self = .treatDispensed(TypedEvent(message))
        case "program_progress": self = .programProgress(TypedEvent(message))
        default: self = .other(message)
        }
    }
}

/// One robot event: its model (nil when `data` did not decode as one, e.g. a field of another
/// type), the `data` object, the robot's timestamp and the whole message as received.
public struct TypedEvent<Model: Sendable & Equatable & Codable>: Sendable, Equatable {
    public var model: Model?
    public var message: EventMessage
    public var data: JSON { message.data }
    public var timestamp: String? { message.timestamp }
    public var raw: String { message.raw }

    /// `message`'s `data` decoded as `Model`, from the value the client parsed (the text is
    /// not read again).
    public init(_ message: EventMessage) {
        self.message = message
        model = try? message.data.decode(Model.self, snakeCaseKeys: true)
    }
}

extension RelayEvent {
    /// The robot event this is, typed; nil for anything else (device status, connection, …).
    public var robotEvent: RobotEvent? {
        if case .event(let message) = self { RobotEvent(message) } else { nil }
    }
}

extension LastKnownState {
    /// The latest `name` event the relay kept, typed.
    public func robotEvent(_ name: String) -> RobotEvent? { events[name].map { RobotEvent($0.message) } }

    public var mode: ModeChange? { if case .modeChanged(let e)? = robotEvent("mode_changed") { e.model } else { nil } }
    public var missionProgress: MissionProgress? {
        if case .missionProgress(let e)? = robotEvent("mission_progress") { e.model } else { nil }
    }
    public var audio: AudioState? { if case .audioState(let e)? = robotEvent("audio_state") { e.model } else { nil } }
    public var programProgress: ProgramStatus? {
        if case .programProgress(let e)? = robotEvent("program_progress") { e.model } else { nil }
    }
}
