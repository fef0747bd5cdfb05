import WimzProtocol
/// One Live Activity request to APNs (docs/protocol.md v1.4 "What the relay sends"): to which
/// token, which event, at which priority, for which state.
public struct LiveActivityRequest: Sendable, Equatable {
    public enum Event: String, Sendable { case start, update, end }

    public var device: DeviceID
    public var appTokenID: Int64
    /// The activity it goes to; nil for a push-to-start (to the app token's start token).
    public var activity: LiveActivityID?
    public var token: String
    public var environment: PushRegistration.Environment
    public var event: Event
    /// 10 or 5 (`apns-priority`).
    public var priority: Int
    /// `aps.timestamp`: whole UNIX seconds, never lower than the last sent to the activity.
    public var timestamp: Int64
    public var state: MissionState
    /// A start's `attributes.robot_name`: the device's name.
    public var robotName: String
    /// An end's reason (a completed run's end carries an alert).
    public var ended: MissionRunEnd?

    public init(device: DeviceID, appTokenID: Int64, activity: LiveActivityID?, token: String, environment: PushRegistration.Environment,
                event: Event, priority: Int, timestamp: Int64, state: MissionState, robotName: String = "", ended: MissionRunEnd? = nil) {
        self.device = device
        self.appTokenID = appTokenID
        self.activity = activity
        self.token = token
        self.environment = environment
        self.event = event
        self.priority = priority
        self.timestamp = timestamp
        self.state = state
        self.robotName = robotName
        self.ended = ended
    }

    /// The request body: `{"aps":{"timestamp":T,"event":E,"content-state":S,"stale-date":T+stale,…},
    /// "wimz":{"device_id":…}}`, with a start's attributes, `input-push-token` and alert, and an
    /// end's `dismissal-date` (and, for a completed run, its alert).
    public func body(staleAfter: Int, dismissAfter: Int) -> [UInt8] {
        var aps: [(String, JSONValue)] = [("timestamp", .int(timestamp)), ("event", .string(event.rawValue)),
                                          ("content-state", state.contentState), ("stale-date", .int(timestamp + Int64(staleAfter)))]
        let names: JSONValue = .array([.string(state.dogName ?? ""), .string(state.trick ?? "")])
        switch event {
        case .start:
            aps += [("attributes-type", "MissionActivityAttributes"),
                    ("attributes", .object([("device_id", .string(device.rawValue)),
                                            ("robot_name", .string(String(robotName.prefix(MissionProgress.maxStringLength))))])),
                    ("input-push-token", 1),
                    ("alert", .object([("title", .object([("loc-key", "WIMZ_MISSION_STARTED_TITLE"), ("loc-args", names)])),
                                       ("body", .object([("loc-key", "WIMZ_MISSION_STARTED"), ("loc-args", names)]))]))]
        case .end:
            aps.append(("dismissal-date", .int(timestamp + Int64(dismissAfter))))
            if ended == .completed {
                aps.append(("alert", .object([("loc-key", .string(PushKind.missionCompleted.locKey)), ("loc-args", names)])))
            }
        case .update:
            break
        }
        return JSONValue.object([("aps", .object(aps)), ("wimz", .object([("device_id", .string(device.rawValue))]))]).encodedBytes
    }
}
