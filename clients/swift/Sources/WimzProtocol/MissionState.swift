/// A mission run's state (docs/protocol.md v1.4 "A mission run"), the one definition the relay
/// and the app library share: the latest `mission_progress` data, member for member as the robot
/// sends it and `aps.content-state` carries it (a member the robot did not send, or sent as
/// another type, is nil; strings at most 64 characters), and whether the robot is connected (the
/// relay's own member). The app's Live Activity decodes it with plain `Codable`
/// (`MissionActivityAttributes.ContentState`); the relay reads it from the robot's JSON with its
/// own typing rules (RelayCore).
public struct MissionState: Sendable, Hashable, Codable {
    public static let maxStringLength = 64

    /// The guide's mission states: `waiting_for_dog`, `watching`, `success`, `completed`, …
    public var status: String?
    public var trick: String?
    public var stage: Int?
    public var totalStages: Int?
    public var dogName: String?
    public var rewards: Int?
    /// 0…1 of the current hold.
    public var progress: Double?
    public var targetSec: Double?
    /// False while the robot is away (the relay noticed; the state is the last it had).
    public var robotOnline: Bool

    public init(status: String? = nil, trick: String? = nil, stage: Int? = nil, totalStages: Int? = nil, dogName: String? = nil,
                rewards: Int? = nil, progress: Double? = nil, targetSec: Double? = nil, robotOnline: Bool = true) {
        self.status = status
        self.trick = trick
        self.stage = stage
        self.totalStages = totalStages
        self.dogName = dogName
        self.rewards = rewards
        self.progress = progress
        self.targetSec = targetSec
        self.robotOnline = robotOnline
    }

    /// The members the robot's `mission_progress` data and `aps.content-state` name, in the
    /// contract's order (`robot_online`, the relay's own, follows them).
    public enum Member: String, CaseIterable, Sendable {
        case status, trick, stage
        case totalStages = "total_stages"
        case dogName = "dog_name"
        case rewards, progress
        case targetSec = "target_sec"
    }

    /// The contract's names, written out: ActivityKit decodes the content state with plain `Codable`.
    enum CodingKeys: String, CodingKey {
        case status, trick, stage, rewards, progress
        case totalStages = "total_stages"
        case dogName = "dog_name"
        case targetSec = "target_sec"
        case robotOnline = "robot_online"
    }
}
