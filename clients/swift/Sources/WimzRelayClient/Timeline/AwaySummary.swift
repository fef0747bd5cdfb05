import Foundation

/// "While you were away": what the timeline says happened between `since` and `now`, computed
/// on the phone from its own copy (the guide's events: `bark_detected`, `treat_dispensed`,
/// `mission_progress`, and the relay's `robot_offline` / `robot_online`), by dog where the
/// events name one (`dog_name`). Sealed entries count once the app has opened them into plain
/// frames; a sealed frame still unopened counts by its kind alone.
public struct AwaySummary: Sendable, Equatable {
    /// What one dog (or, under `nil`, no named dog) did.
    public struct Counts: Sendable, Equatable {
        public var barks = 0
        public var treats = 0
        /// Tricks done (`success`) and failed (`failed`) in missions.
        public var tricksDone = 0
        public var tricksFailed = 0
        /// Missions the robot finished (`completed`).
        public var missionsCompleted = 0
    }

    public var since: Date
    public var now: Date
    /// By dog name; `nil` for events that name none.
    public var byDog: [String?: Counts] = [:]
    /// How long the robot was offline in the window (a gap still open counts up to `now`).
    public var offline: TimeInterval = 0
    /// The window's entries, oldest first.
    public var entries: [TimelineEntry] = []

    public var total: Counts {
        byDog.values.reduce(into: Counts()) { sum, c in
            sum.barks += c.barks
            sum.treats += c.treats
            sum.tricksDone += c.tricksDone
            sum.tricksFailed += c.tricksFailed
            sum.missionsCompleted += c.missionsCompleted
        }
    }

    public init(entries all: [TimelineEntry], since: Date, now: Date) {
        self.since = since
        self.now = now
        entries = all.filter { $0.at >= since && $0.at <= now }
        var offlineSince: Date?
        // A robot already gone when the window opened: its offline entry is the last one before it.
        if let last = all.last(where: { $0.at < since && ($0.event == "robot_offline" || $0.event == "robot_online") }),
           last.event == "robot_offline" {
            offlineSince = since
        }
        for entry in entries {
            let dog = entry.data["dog_name"]?.stringValue
            switch (entry.event, entry.data["status"]?.stringValue) {
            case ("bark_detected", _): byDog[dog, default: Counts()].barks += 1
            case ("treat_dispensed", _): byDog[dog, default: Counts()].treats += 1
            case ("mission_progress", "success"?): byDog[dog, default: Counts()].tricksDone += 1
            case ("mission_progress", "failed"?): byDog[dog, default: Counts()].tricksFailed += 1
            case ("mission_progress", "completed"?), ("mission_completed", _): byDog[dog, default: Counts()].missionsCompleted += 1
            case ("robot_offline", _):
                let left = entry.data["since"]?.stringValue.flatMap(ISO8601.date) ?? entry.at
                offlineSince = offlineSince ?? max(left, since)
            case ("robot_online", _):
                if let from = offlineSince { offline += entry.at.timeIntervalSince(from) }
                offlineSince = nil
            default: break
            }
        }
        if let from = offlineSince { offline += now.timeIntervalSince(from) }
    }
}
