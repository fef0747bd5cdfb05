import Foundation
import WimzProtocol
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
    /// whether the robot is connected — the relay's own definition (WimzProtocol).
    public typealias ContentState = MissionState

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
