import WimzProtocol

/// How the relay reads a mission's progress (``MissionProgress``, WimzProtocol) from the robot's
/// JSON: each member by the type the app's `ContentState` decodes.
extension MissionProgress {
    /// A member's value as read from JSON, before the member's type is applied.
    public enum Scalar: Sendable {
        case text(String)
        case integer(Int64)
        case number(Double)
        /// null, a boolean, an object or an array: no value for any member.
        case other

        init(_ value: JSONValue?) {
            switch value {
            case .string(let s)?: self = .text(s)
            case .int(let n)?: self = .integer(n)
            case .double(let d)?: self = .number(d)
            default: self = .other
            }
        }
    }

    /// Sets `member` from `value` by the member's type, the one place the typing rules are: a
    /// string cut to 64 characters; an integer, or a whole number written with a fraction; any
    /// number; anything else nil.
    public mutating func set(_ member: Member, _ value: Scalar) {
        var text: String? { if case .text(let s) = value { String(s.prefix(Self.maxStringLength)) } else { nil } }
        var integer: Int? {
            switch value {
            case .integer(let n): Int(n)
            case .number(let d) where d == d.rounded() && abs(d) < 9e15: Int(d)
            default: nil
            }
        }
        var number: Double? {
            switch value {
            case .integer(let n): Double(n)
            case .number(let d): d
            default: nil
            }
        }
        switch member {
        case .status: status = text
        case .trick: trick = text
        case .stage: stage = integer
        case .totalStages: totalStages = integer
        case .dogName: dogName = text
        case .rewards: rewards = integer
        case .progress: progress = number
        case .targetSec: targetSec = number
        }
    }

    /// `member`'s value as JSON (null when nil).
    func json(_ member: Member) -> JSONValue {
        switch member {
        case .status: .optional(status)
        case .trick: .optional(trick)
        case .stage: stage.map { .int(Int64($0)) } ?? .null
        case .totalStages: totalStages.map { .int(Int64($0)) } ?? .null
        case .dogName: .optional(dogName)
        case .rewards: rewards.map { .int(Int64($0)) } ?? .null
        case .progress: progress.map(JSONValue.double) ?? .null
        case .targetSec: targetSec.map(JSONValue.double) ?? .null
        }
    }

}

/// How the relay reads a mission's state (``MissionState``, WimzProtocol) and writes it as
/// `aps.content-state`.
extension MissionState {
    /// From a `mission_progress` event's `data` (nil: the data is not an object).
    public init?(data: JSONValue?, robotOnline: Bool = true) {
        guard case .object = data else { return nil }
        var progress = MissionProgress()
        for member in MissionProgress.Member.allCases { progress.set(member, .init(data?.member(member.rawValue))) }
        self.init(progress, robotOnline: robotOnline)
    }

    /// `aps.content-state`, every member present (null where nil), in the contract's order.
    public var contentState: JSONValue {
        .object(MissionProgress.Member.allCases.map { ($0.rawValue, reported.json($0)) } + [("robot_online", .bool(robotOnline))])
    }

    /// Read back from `contentState` (the store keeps it as that JSON).
    public init?(contentState: JSONValue) {
        guard let online = contentState.member("robot_online")?.boolValue, var state = MissionState(data: contentState) else { return nil }
        state.robotOnline = online
        self = state
    }
}

/// What the robot did that may move a device's run.
public enum MissionSignal: Sendable, Equatable {
    /// A `mission_progress` with this state.
    case progress(MissionState)
    /// A `mode_changed` from `previous` to `mode`.
    case modeChanged(previous: String?, mode: String?)
    /// The robot connected (true) or left (false).
    case robotOnline(Bool)
    /// The robot has been away for `WIMZ_PUSH_OFFLINE_AFTER` (the moment `robot_offline` is due).
    case robotGone
}

/// How a run ended.
public enum MissionRunEnd: String, Sendable, Equatable {
    case completed
    case leftMission = "left_mission"
    case robotAway = "robot_away"
}

/// What a signal did to a device's run; what the Live Activities are told.
public enum MissionRunChange: Sendable, Equatable {
    case began(MissionState)
    /// The state changed; `statusChanged` when `status` differs from the state before.
    case changed(MissionState, statusChanged: Bool)
    case ended(MissionState, MissionRunEnd)
}

/// A device's open run. The rules of docs/protocol.md v1.4 "A mission run", once: begins with a
/// `mission_progress` whose status is not `completed` while none is open; ends with `completed`,
/// with a `mode_changed` out of `mission`, or when the robot is gone; its state is the latest
/// progress, with `robotOnline` following the robot.
public struct MissionRun: Sendable, Equatable {
    public var state: MissionState
    public var openedAt: UnixTime

    public init(state: MissionState, openedAt: UnixTime) {
        self.state = state
        self.openedAt = openedAt
    }

    public static let completedStatus = "completed"
    public static let missionMode = "mission"

    /// The run after `signal` (nil: none open) and what changed (nil: nothing).
    public static func next(_ run: MissionRun?, _ signal: MissionSignal, at now: UnixTime) -> (run: MissionRun?, change: MissionRunChange?) {
        switch (run, signal) {
        case (nil, .progress(let state)):
            guard state.status != completedStatus else { return (nil, nil) }
            return (MissionRun(state: state, openedAt: now), .began(state))
        case (var run?, .progress(var state)):
            state.robotOnline = run.state.robotOnline
            if state.status == completedStatus { return (nil, .ended(state, .completed)) }
            guard state != run.state else { return (run, nil) }
            let statusChanged = state.status != run.state.status
            run.state = state
            return (run, .changed(state, statusChanged: statusChanged))
        case (let run?, .modeChanged(let previous, let mode)):
            guard previous == missionMode, mode != missionMode else { return (run, nil) }
            return (nil, .ended(run.state, .leftMission))
        case (var run?, .robotOnline(let online)):
            guard run.state.robotOnline != online else { return (run, nil) }
            run.state.robotOnline = online
            return (run, .changed(run.state, statusChanged: false))
        case (var run?, .robotGone):
            run.state.robotOnline = false
            return (nil, .ended(run.state, .robotAway))
        case (nil, _):
            return (nil, nil)
        }
    }
}
