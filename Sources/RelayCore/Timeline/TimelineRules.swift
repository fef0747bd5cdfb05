/// What the timeline keeps and how it is read (docs/protocol.md "The household's timeline", v1.6), pure.
public enum TimelineRules {
    /// The robot's events kept, by name (a `mission_progress` only when its run ended).
    static let keptEvents: [[UInt8]] = ["bark_detected", "dog_detected", "treat_dispensed", "mode_changed"].map { Array($0.utf8) }
    /// A sealed device's frames kept, by `kind` (a sealed `mission_progress` is not: the relay
    /// can't see its status; the robot names a finished run `mission_completed`).
    static let keptSealedKinds: [[UInt8]] = ["bark_detected", "dog_detected", "treat_dispensed", "mode_changed", "mission_completed"]
        .map { Array($0.utf8) }
    static let missionProgress = Array("mission_progress".utf8)
    /// A run's last `mission_progress`, by its `data.status`.
    static let endedStatuses: Set<String> = ["success", "failed", "completed"]

    /// Every name an entry may have: the robot's kept events and kinds, and the relay's own.
    public static let names: Set<String> = Set((keptEvents + keptSealedKinds + [missionProgress]).map { String(decoding: $0, as: UTF8.self) })
        .union(["robot_online", "robot_offline", "mission_run"]).union(TimelineEntry.householdEvents)

    /// The name a robot's frame is kept under, or nil when the timeline does not keep it: looked
    /// up by the envelope's event name (or sealed kind) without decoding the frame, and only a
    /// `mission_progress` is read further (its status).
    public static func keptName(_ bytes: UnsafeBufferPointer<UInt8>, _ envelope: Envelope) -> [UInt8]? {
        guard let range = envelope.eventName else { return nil }
        let name = UnsafeBufferPointer(rebasing: bytes[range])
        switch envelope.kind {
        case .event:
            if let kept = keptEvents.first(where: { name.elementsEqual($0) }) { return kept }
            guard name.elementsEqual(missionProgress), let status = MissionStateScanner.state(bytes)?.status,
                  endedStatuses.contains(status) else { return nil }
            return missionProgress
        case .sealed:
            return keptSealedKinds.first { name.elementsEqual($0) }
        default:
            return nil
        }
    }

    /// A page's size: `limit` 1–500 (50 when absent).
    public static func limit(_ text: String?) -> Int? {
        guard let text else { return 50 }
        guard (1...3).contains(text.utf8.count), text.utf8.allSatisfy({ (48...57).contains($0) }), let n = Int(text), (1...500).contains(n) else {
            return nil
        }
        return n
    }

    /// Where a caller's view begins: the latest of now − `days`, the last erase, the moment the
    /// relay holds every entry since, and when a guest became one.
    public static func begins(now: UnixTime, days: Int, erasedAt: UnixTime?, keptSince: UnixTime, guestSince: UnixTime?) -> UnixTime {
        [now.adding(seconds: -Int64(days) * 86_400), erasedAt, keptSince, guestSince].compactMap { $0 }.max()!
    }
}
