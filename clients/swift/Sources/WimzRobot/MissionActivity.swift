import Foundation
#if canImport(ActivityKit)
import ActivityKit
#endif

/// The mission on the lock screen (docs/protocol.md v1.4): the attributes of the Live Activity
/// the relay starts and keeps current. Its name is the `attributes-type` the relay's push-to-start
/// request names, so the app's widget must declare its activity with this type.
///
/// ```swift
/// struct MissionLiveActivity: Widget {
///     var body: some WidgetConfiguration {
///         ActivityConfiguration(for: MissionActivityAttributes.self) { context in
///             MissionLockScreenView(state: context.state, robot: context.attributes.robotName)
///         } dynamicIsland: { context in … }
///     }
/// }
/// ```
public struct MissionActivityAttributes: Codable, Hashable, Sendable {
    /// What a start or update carries (`aps.content-state`), member for member as the relay sends
    /// it: the run's latest `mission_progress` data (a member the robot did not send is nil) and
    /// whether the robot is connected.
    public struct ContentState: Codable, Hashable, Sendable {
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

        /// ActivityKit decodes the content state with plain `Codable`: the keys are written out.
        enum CodingKeys: String, CodingKey {
            case status, trick, stage, rewards, progress
            case totalStages = "total_stages"
            case dogName = "dog_name"
            case targetSec = "target_sec"
            case robotOnline = "robot_online"
        }

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

        /// The state an app shows for a `mission_progress` it received itself (while it is open,
        /// it updates its own activity: the relay sends none to an app with a socket).
        public init(_ progress: MissionProgress, robotOnline: Bool = true) {
            self.init(status: progress.status, trick: progress.trick, stage: progress.stage, totalStages: progress.totalStages,
                      dogName: progress.dogName, rewards: progress.rewards, progress: progress.progress,
                      targetSec: progress.targetSec, robotOnline: robotOnline)
        }
    }

    public var deviceID: String
    /// The device's name as the relay knows it.
    public var robotName: String

    enum CodingKeys: String, CodingKey {
        case deviceID = "device_id"
        case robotName = "robot_name"
    }

    public init(deviceID: String, robotName: String) {
        self.deviceID = deviceID
        self.robotName = robotName
    }
}

#if canImport(ActivityKit)
extension MissionActivityAttributes: ActivityAttributes {}
#endif
