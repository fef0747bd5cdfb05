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
    /// The same as JSON strings, quotes included, as they are sent (no escapes in these words).
    static let endedStatusTokens: [[UInt8]] = endedStatuses.sorted().map { Array("\"\($0)\"".utf8) }

    /// Every name an entry may have: the robot's kept events and kinds, and the relay's own.
    public static let names: Set<String> = Set((keptEvents + keptSealedKinds + [missionProgress]).map { String(decoding: $0, as: UTF8.self) })
        .union(["robot_online", "robot_offline", "mission_run"]).union(TimelineEntry.householdEvents)

    /// The name a robot's frame is kept under, or nil when the timeline does not keep it: looked
    /// up by the envelope's event name (or sealed kind) without decoding the frame, and only a
    /// `mission_progress` is read further (its status).
    ///
    /// Every event forwarded comes through here: names are compared by length, then word by word;
    /// a `mission_progress` (the most frequent event in a mission) costs one scan of its members
    /// for `data.status`, its strings skipped by memchr.
    public static func keptName(_ bytes: UnsafeBufferPointer<UInt8>, _ envelope: Envelope) -> [UInt8]? {
        guard let range = envelope.eventName else { return nil }
        switch envelope.kind {
        case .event:
            if let kept = first(of: keptEvents, at: range, in: bytes) { return kept }
            guard first(of: [missionProgress], at: range, in: bytes) != nil, let status = Envelope.memberValue("data", "status", in: bytes)
            else { return nil }
            if first(of: endedStatusTokens, at: status, in: bytes) != nil { return missionProgress }
            // A status spelled with escapes: decoded, as rare as it is.
            guard bytes[status].contains(UInt8(ascii: "\\")),
                  case .string(let text)? = try? JSONReader.parse(Array(bytes[status])), endedStatuses.contains(text) else { return nil }
            return missionProgress
        case .sealed:
            return first(of: keptSealedKinds, at: range, in: bytes)
        default:
            return nil
        }
    }

    /// The first of `names` that the bytes at `range` spell.
    private static func first(of names: [[UInt8]], at range: Range<Int>, in bytes: UnsafeBufferPointer<UInt8>) -> [UInt8]? {
        let start = bytes.baseAddress! + range.lowerBound
        for name in names where name.count == range.count {
            if name.withUnsafeBufferPointer({ sameBytes(start, $0.baseAddress!, count: range.count) }) { return name }
        }
        return nil
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
