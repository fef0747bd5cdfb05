// The commands the robot answers on its control socket (`/ws/control`, carried by the relay as
// `{"type":"command",…}`), typed: the parameters are the guide's request bodies (§3.2, §5.2) and
// the replies its answers (`MissionStartResponse`, `ModeSetResponse`).
import WimzRelayClient

/// `ping`: whether the robot's software answers at all.
public struct PingRobot: RobotCommand {
    public typealias Reply = Pong
    public static let name = "ping"
    public init() {}
}

/// The answer to ``PingRobot``.
public struct Pong: Codable, Sendable, Equatable {
    public var pong: Bool?
    public init(pong: Bool? = nil) { self.pong = pong }
}

/// `start_mission` (§3.2's body): the mission, and its parameters (`dog_id`, …).
public struct StartMission: RobotCommand {
    public typealias Reply = MissionStartResponse
    public static let name = "start_mission"
    public var missionName: String
    public var parameters: [String: String]?

    public init(missionName: String, parameters: [String: String]? = nil) {
        self.missionName = missionName
        self.parameters = parameters
    }
}

/// `set_mode` (§5.2's body): refused with `success` false while a mission locks the mode.
public struct SetMode: RobotCommand {
    public typealias Reply = ModeSetResponse
    public static let name = "set_mode"
    public var mode: String

    public init(mode: String) { self.mode = mode }
}

/// `treat`: dispense one treat (a `treat_dispensed` event follows).
public struct DispenseTreat: RobotCommand {
    public typealias Reply = TreatDispensed
    public static let name = "treat"
    public init() {}
}

/// The answer to ``DispenseTreat``.
public struct TreatDispensed: Codable, Sendable, Equatable {
    public var dispensed: Bool?
    public init(dispensed: Bool? = nil) { self.dispensed = dispensed }
}
