/// When each activity gets an update, and at which priority (docs/protocol.md v1.4 "Update"): a
/// change of status against the last state sent to it goes at once, at 10 while the hourly
/// allowance lasts (then at 5); any other change at 5, at most one per interval, the newest state
/// when it goes — so the newest state is always sent in the end. Timestamps never go back. Pure
/// state with the caller's clock (monotonic ns); service-thread owned.
public struct LiveActivityPlanner {
    public struct Key: Hashable, Sendable {
        public var device: DeviceID
        public var appTokenID: Int64
        public var activity: LiveActivityID

        public init(device: DeviceID, appTokenID: Int64, activity: LiveActivityID) {
            self.device = device
            self.appTokenID = appTokenID
            self.activity = activity
        }
    }

    public enum Decision: Equatable, Sendable {
        case sendNow(priority: Int)
        /// Coalesced: `due` hands it out when its interval has passed.
        case later
    }

    struct Activity {
        /// The status last sent (`.some(nil)`: a state without one was sent).
        var sentStatus: String??
        var lastTimestamp: Int64 = 0
        /// When priority-10 updates went, within the last hour (monotonic ns).
        var alerts: [UInt64] = []
        /// The next coalesced update may go at this time.
        var nextAt: UInt64 = 0
        /// A change waits to be sent (coalesced, a catch-up or a retry).
        var pendingSince: UInt64?
    }

    public let interval: UInt64
    public let alertsPerHour: Int
    private var activities: [Key: Activity] = [:]
    static let hour: UInt64 = 3_600_000_000_000

    public init(interval: UInt64, alertsPerHour: Int) {
        self.interval = interval
        self.alertsPerHour = alertsPerHour
    }

    /// How a change to `status` goes to `key` now.
    public mutating func decide(_ key: Key, status: String?, now: UInt64) -> Decision {
        var activity = activities[key] ?? Activity()
        defer { activities[key] = activity }
        if activity.sentStatus.map({ $0 != status }) ?? true {
            activity.alerts.removeAll { now - $0 >= Self.hour }
            return .sendNow(priority: activity.alerts.count < alertsPerHour ? 10 : 5)
        }
        if activity.pendingSince == nil, now >= activity.nextAt { return .sendNow(priority: 5) }
        if activity.pendingSince == nil { activity.pendingSince = now }
        return .later
    }

    /// `key` is to get the current state soon (`at`): a catch-up, or a retry after APNs said wait.
    public mutating func schedule(_ key: Key, at: UInt64, now: UInt64) {
        var activity = activities[key] ?? Activity()
        activity.pendingSince = activity.pendingSince ?? now
        activity.nextAt = at
        activities[key] = activity
    }

    /// An update went to `key`: what it carried, at which priority. Returns the timestamp to
    /// send (`timestamp`, or the last one sent if that was later).
    public mutating func sent(_ key: Key, status: String?, timestamp: Int64, priority: Int, now: UInt64) -> Int64 {
        var activity = activities[key] ?? Activity()
        activity.sentStatus = .some(status)
        activity.lastTimestamp = max(activity.lastTimestamp, timestamp)
        if priority == 10 { activity.alerts.append(now) }
        activity.nextAt = now + interval
        activity.pendingSince = nil
        activities[key] = activity
        return activity.lastTimestamp
    }

    /// The timestamp an end (or another request outside the update rules) carries to `key`.
    public mutating func stamp(_ key: Key, _ timestamp: Int64) -> Int64 {
        var activity = activities[key] ?? Activity()
        activity.lastTimestamp = max(activity.lastTimestamp, timestamp)
        activities[key] = activity
        return activity.lastTimestamp
    }

    /// The activities whose waiting change may go now.
    public func due(now: UInt64) -> [Key] {
        activities.compactMap { key, activity in activity.pendingSince != nil && now >= activity.nextAt ? key : nil }
    }

    /// Nothing waits for `key` any more (its app is open again).
    public mutating func cancelPending(_ key: Key) {
        activities[key]?.pendingSince = nil
    }

    /// `key` is gone (ended, removed, unregistered): what was kept of it too.
    public mutating func forget(_ key: Key) {
        activities[key] = nil
    }

    /// Every activity of `device` (its run ended).
    public mutating func forget(device: DeviceID) {
        activities = activities.filter { $0.key.device != device }
    }
}
