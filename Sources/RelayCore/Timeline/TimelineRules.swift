#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// What the timeline keeps and how it is read (docs/protocol.md "The household's timeline", v1.6), pure.
public enum TimelineRules {
    /// The robot's events kept, by name (a `mission_progress` only when its run ended).
    static let keptEvents = ["bark_detected", "dog_detected", "treat_dispensed", "mode_changed"]
    /// A sealed device's frames kept, by `kind` (a sealed `mission_progress` is not: the relay
    /// can't see its status; the robot names a finished run `mission_completed`).
    static let keptSealedKinds = keptEvents + ["mission_completed"]
    /// A run's last `mission_progress`, by its `data.status`.
    static let endedStatuses: Set<String> = ["success", "failed", "completed"]

    /// Every name an entry may have: the robot's kept events and kinds, and the relay's own.
    public static let names: Set<String> = Set(keptSealedKinds + ["mission_progress"])
        .union(["robot_online", "robot_offline", "mission_run"]).union(TimelineEntry.householdEvents)

    /// The name a robot's frame is kept under, or nil when the timeline does not keep it: looked
    /// up by the envelope's event name (or sealed kind) without decoding the frame, and only a
    /// `mission_progress` is read further (its status).
    ///
    /// Every event forwarded comes through here, so each step is a switch on a length and one
    /// word-wise comparison (a table walk cost a tenth of a message): the name, then a `mission_progress`'s
    /// `data.status` where the robot library writes it (first in `data`, right after the name),
    /// anywhere else found by a walk of the members, skipped when no ended status is spelled in
    /// the frame at all. The names returned are literals: handing one on allocates nothing.
    public static func keptName(_ bytes: UnsafeBufferPointer<UInt8>, _ envelope: Envelope) -> String? {
        guard let range = envelope.eventName else { return nil }
        let name = UnsafeRawPointer(bytes.baseAddress! + range.lowerBound)
        switch envelope.kind {
        case .event:
            if let kept = keptEvent(name, count: range.count) { return kept }
            guard range.count == 16, spelled(name, "mission_progress") else { return nil }
            return runEnded(bytes, afterName: range.upperBound) ? "mission_progress" : nil
        case .sealed:
            if let kept = keptEvent(name, count: range.count) { return kept }
            return range.count == 17 && spelled(name, "mission_completed") ? "mission_completed" : nil
        default:
            return nil
        }
    }

    /// One of `keptEvents`, spelled at `name`.
    static func keptEvent(_ name: UnsafeRawPointer, count: Int) -> String? {
        switch count {
        case 12 where spelled(name, "dog_detected"): "dog_detected"
        case 12 where spelled(name, "mode_changed"): "mode_changed"
        case 13 where spelled(name, "bark_detected"): "bark_detected"
        case 15 where spelled(name, "treat_dispensed"): "treat_dispensed"
        default: nil
        }
    }

    /// Whether a `mission_progress`'s `data.status` is an ended one (`afterName`: the name's
    /// closing quote).
    static func runEnded(_ bytes: UnsafeBufferPointer<UInt8>, afterName: Int) -> Bool {
        let base = UnsafeRawPointer(bytes.baseAddress!)
        let compact: StaticString = #"","data":{"status":"#
        let valueStart = afterName + compact.utf8CodeUnitCount
        // A frame cut short takes the walk (which finds it so); one malformed further on is the
        // database worker's to leave out (it parses what it stores). In place: the value is one
        // of the tokens, or — with no backslash in its first 10 bytes — not an ended status at all
        // (it closed there unescaped, or it is longer than "completed").
        if valueStart + 11 <= bytes.count, bytes[bytes.count - 1] == UInt8(ascii: "}"), spelled(base + afterName, compact),
           bytes[valueStart] == UInt8(ascii: "\"") {
            let value = base + valueStart
            if spelled(value, #""failed""#) || spelled(value, #""success""#) || spelled(value, #""completed""#) { return true }
            let word = value.loadUnaligned(fromByteOffset: 1, as: UInt64.self) ^ 0x5C5C_5C5C_5C5C_5C5C  // a zero byte where a backslash was
            let escaped = (word &- 0x0101_0101_0101_0101) & ~word & 0x8080_8080_8080_8080 != 0
                || value.load(fromByteOffset: 9, as: UInt8.self) == UInt8(ascii: "\\") || value.load(fromByteOffset: 10, as: UInt8.self) == UInt8(ascii: "\\")
            if !escaped { return false }
        }
        guard mayHoldEndedStatus(bytes), let status = Envelope.memberValue("data", "status", in: bytes) else { return false }
        if isEndedToken(base + status.lowerBound, count: status.count) { return true }
        // A status spelled with escapes: decoded, as rare as it is.
        guard bytes[status].contains(UInt8(ascii: "\\")), case .string(let text)? = try? JSONReader.parse(Array(bytes[status])) else {
            return false
        }
        return endedStatuses.contains(text)
    }

    /// An ended status as a JSON string, quotes included, as sent (no escapes in these words).
    private static func isEndedToken(_ token: UnsafeRawPointer, count: Int) -> Bool {
        switch count {
        case 8: spelled(token, #""failed""#)
        case 9: spelled(token, #""success""#)
        case 11: spelled(token, #""completed""#)
        default: false
        }
    }

    /// False when no ended status can be in the frame: none is spelled anywhere in it and nothing
    /// is escaped (memchr from quote to quote), so progress in another shape skips the walk.
    private static func mayHoldEndedStatus(_ bytes: UnsafeBufferPointer<UInt8>) -> Bool {
        let base = UnsafeRawPointer(bytes.baseAddress!), end = base + bytes.count
        if memchr(base, Int32(UInt8(ascii: "\\")), bytes.count) != nil { return true }
        var cursor = base
        while cursor < end, let quote = memchr(cursor, Int32(UInt8(ascii: "\"")), end - cursor).map(UnsafeRawPointer.init) {
            let left = end - quote
            if (left >= 11 && isEndedToken(quote, count: 11)) || (left >= 9 && isEndedToken(quote, count: 9))
                || (left >= 8 && isEndedToken(quote, count: 8)) {
                return true
            }
            cursor = quote + 1
        }
        return false
    }

    /// Whether `text`'s bytes are at `at` (the caller has checked there are that many): compared
    /// a word at a time, inlined (a memcmp call cost more than the comparison).
    @inline(__always) private static func spelled(_ at: UnsafeRawPointer, _ text: StaticString) -> Bool {
        sameBytes(at, text.utf8Start, count: text.utf8CodeUnitCount)
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
