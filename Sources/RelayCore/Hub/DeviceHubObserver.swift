/// What the hub tells the server, synchronously on the service thread. One observer, set by the
/// composition root (`RelayComponents`), which hands each report to the component it concerns.
/// Every method does nothing by default, so a test observes only what it checks.
public protocol DeviceHubObserver: AnyObject {
    /// A message was not delivered (metrics).
    func hubDropped(_ reason: DropReason)
    /// A robot was replaced by a newer connection.
    func hubReplacedRobot(_ old: Session, with new: Session)
    /// The first socket of a device on this node attached (cluster: claim the device).
    func hubDeviceArrived(_ device: DeviceID)
    /// The last socket of a device on this node detached.
    func hubDeviceLeft(_ device: DeviceID)
    /// A socket of a device attached or detached; `robotLeftAt` is set when its robot went offline.
    func hubPresenceChanged(_ device: DeviceID, robotLeftAt: UnixTime?)
    /// The robot answered an HTTP request (`http_response`/`http_body`, docs/protocol.md v1.1): the
    /// frame and the robot session. Such frames never go to the apps.
    func hubRobotAnsweredHTTP(_ frame: Payload, from robot: Session)
    /// A push-relevant robot event of a device with registrations: the push it may become (the hub
    /// decides, a mission completed included), the message, and its number in the missed-event
    /// history (epoch, seq).
    func hubPushEvent(_ device: DeviceID, kind: PushKind, message: Payload, place: (epoch: String, seq: UInt64))
    /// A `mission_progress` or `mode_changed` of a device with Live Activity tokens, read.
    func hubMissionSignal(_ device: DeviceID, _ signal: MissionSignal)
    /// The robot's `settings_applied` (v1.6): the relay's to store; it never goes to the apps.
    func hubSettingsApplied(_ device: DeviceID, _ frame: Payload)
    /// A robot frame the timeline keeps (v1.6), under `name` (its event, or its sealed kind).
    func hubTimelineEntry(_ device: DeviceID, name: String, _ frame: Payload)
}

extension DeviceHubObserver {
    public func hubDropped(_ reason: DropReason) {}
    public func hubReplacedRobot(_ old: Session, with new: Session) {}
    public func hubDeviceArrived(_ device: DeviceID) {}
    public func hubDeviceLeft(_ device: DeviceID) {}
    public func hubPresenceChanged(_ device: DeviceID, robotLeftAt: UnixTime?) {}
    public func hubRobotAnsweredHTTP(_ frame: Payload, from robot: Session) {}
    public func hubPushEvent(_ device: DeviceID, kind: PushKind, message: Payload, place: (epoch: String, seq: UInt64)) {}
    public func hubMissionSignal(_ device: DeviceID, _ signal: MissionSignal) {}
    public func hubSettingsApplied(_ device: DeviceID, _ frame: Payload) {}
    public func hubTimelineEntry(_ device: DeviceID, name: String, _ frame: Payload) {}
}
