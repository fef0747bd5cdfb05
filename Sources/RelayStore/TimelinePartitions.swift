import RelayCore

/// The timeline's day partitions (migrations/0018): made ahead of time, and pruned — a whole
/// partition once it is past every device's retention, else, in batches, the rows of the devices
/// it is past. Run by the retention pruner, one node at a time.
public struct TimelinePartitions {
    let db: PGConnection
    static let secondsPerDay: Int64 = 86_400
    static let prefix = "timeline_entries_p"

    public init(_ db: PGConnection) { self.db = db }

    /// A partition and the UTC day it holds, `[start, start + 1 day)`.
    public struct Partition: Sendable, Equatable {
        public var name: String
        public var start: UnixTime

        /// `timeline_entries_pYYYYMMDD` for the day that begins at `start`.
        init(day start: UnixTime) {
            self.start = start
            let date = start.iso8601.prefix(10).replacingOccurrences(of: "-", with: "")
            name = TimelinePartitions.prefix + date
        }

        var end: UnixTime { start.adding(seconds: TimelinePartitions.secondsPerDay) }
    }

    /// The day partitions there are, oldest first.
    public func partitions() throws -> [Partition] {
        try db.execute(
            """
            SELECT c.relname FROM pg_inherits i JOIN pg_class c ON c.oid = i.inhrelid
            WHERE i.inhparent = 'timeline_entries'::regclass AND c.relname LIKE 'timeline_entries_p%' ORDER BY c.relname
            """).records.compactMap { row in
            let name = try row.string("relname")
            let digits = name.dropFirst(Self.prefix.count)
            guard digits.count == 8, let start = UnixTime(iso8601: "\(digits.prefix(4))-\(digits.dropFirst(4).prefix(2))-\(digits.suffix(2))T00:00:00Z")
            else { return nil }
            return Partition(day: start)
        }
    }

    /// Makes the partitions of today and the `ahead` days after it (UTC) that do not exist yet.
    /// Returns how many were made.
    @discardableResult
    public func makePartitions(now: UnixTime, ahead: Int = 2) throws -> Int {
        let today = UnixTime(seconds: now.seconds - ((now.seconds % Self.secondsPerDay) + Self.secondsPerDay) % Self.secondsPerDay)
        let existing = Set(try partitions().map(\.name))
        var made = 0
        for k in 0...ahead {
            let day = Partition(day: today.adding(seconds: Int64(k) * Self.secondsPerDay))
            guard !existing.contains(day.name) else { continue }
            try db.execute(
                """
                CREATE TABLE IF NOT EXISTS \(identifier: day.name) PARTITION OF timeline_entries
                FOR VALUES FROM (\(day.start)::timestamptz) TO (\(day.end)::timestamptz)
                """)
            made += 1
        }
        return made
    }

    /// One step of pruning, oldest partition first: drops one partition past every device's
    /// retention, or deletes up to `limit` rows past their device's retention (`defaultDays` for a
    /// device without its own). Returns what it did; `.nothing` once there is nothing left to do.
    public func pruneStep(now: UnixTime, defaultDays: Int, limit: Int) throws -> PruneStep {
        let longest = max(defaultDays, Int(try db.execute("SELECT coalesce(max(days), 0) AS days FROM timeline_devices").single().int64("days")))
        for partition in try partitions() {
            let pastFor = Int((now.seconds - partition.end.seconds) / Self.secondsPerDay)  // whole days its newest row is old
            guard pastFor >= 1 else { break }
            if pastFor >= longest {
                try db.execute("DROP TABLE \(identifier: partition.name)")
                return .dropped(partition.name)
            }
            let deleted = try db.execute(
                """
                DELETE FROM \(identifier: partition.name) WHERE ctid = ANY(ARRAY(
                    SELECT p.ctid FROM \(identifier: partition.name) p LEFT JOIN timeline_devices t ON t.device_id = p.device_id
                    WHERE coalesce(t.days, \(defaultDays)::int) <= \(pastFor)::int LIMIT \(limit)::int))
                """).affected
            if deleted > 0 { return .deleted(deleted) }
        }
        // What no day partition held: row by row against its device's retention.
        let deleted = try db.execute(
            """
            DELETE FROM timeline_entries_default WHERE ctid = ANY(ARRAY(
                SELECT p.ctid FROM timeline_entries_default p LEFT JOIN timeline_devices t ON t.device_id = p.device_id
                WHERE p.at < \(now)::timestamptz - make_interval(days => coalesce(t.days, \(defaultDays)::int)) LIMIT \(limit)::int))
            """).affected
        return deleted > 0 ? .deleted(deleted) : .nothing
    }

    public enum PruneStep: Sendable, Equatable {
        case dropped(String)
        case deleted(Int)
        case nothing
    }
}
