import RelayCore

/// The household's timeline (migrations/0018, docs/protocol.md "The household's timeline", v1.6): entries
/// appended in batches, read a page at a time by number within the caller's window, each
/// device's retention and erasure, and the partitions kept and dropped by day.
public struct TimelineRepository {
    let db: PGConnection

    public init(_ db: PGConnection) { self.db = db }

    /// An entry on its way to the store, in the order the relay received it (`Codable`: a line
    /// of the recorder's spool).
    public struct NewEntry: Sendable, Equatable, Codable {
        /// When a presence entry is written: the robot's presence as the store last wrote it decides.
        public enum Condition: Sendable, Equatable, Codable {
            case always
            /// `robot_online`: at the device's first entry ever, or after a stored `robot_offline`.
            case robotBack
            /// `robot_offline` for a robot that left at `since`: unless one is the last presence entry
            /// already, or the robot is back on a live node since (the cluster's presence).
            case robotGone(since: UnixTime)
        }

        public var device: DeviceID
        public var at: UnixTime
        public var source: TimelineEntry.Source
        public var event: String
        /// The frame's exact text.
        public var message: String
        public var condition: Condition

        public init(device: DeviceID, at: UnixTime, source: TimelineEntry.Source, event: String, message: String,
                    condition: Condition = .always) {
            (self.device, self.at, self.source, self.event, self.message, self.condition) = (device, at, source, event, message, condition)
        }
    }

    /// What a batch stored for one device: its newest entry's number, and the newest a guest may
    /// see (nil: none in this batch), for the live notice.
    public struct Stored: Sendable, Equatable {
        public var device: DeviceID
        public var newest: Int64
        public var newestForGuests: Int64?
    }

    /// Stores `entries` in one transaction: each device's numbers taken under its row's lock (a
    /// device that is gone or disabled stores nothing: its timeline went with it; an entry
    /// received before the device's last erase is dropped), presence entries by their condition;
    /// every node hears of each device's newest (`timeline:<device> <newest> <newest for guests or ->`).
    ///
    /// `mayBeStored`: entries an earlier attempt may have stored — a batch whose commit's answer
    /// was lost (a failover, a connection cut), a spool written at a stop — of which those already
    /// stored (the same device, receive time and text) are left out: each entry is stored once.
    @discardableResult
    public func append(_ entries: [NewEntry], mayBeStored: Bool = false) throws -> [Stored] {
        guard !entries.isEmpty else { return [] }
        return try db.transaction { try appendWithin(mayBeStored ? try unstored(entries) : entries) }
    }

    /// The entries of `entries` not stored yet: one statement, each looked up in its own day's
    /// partition by device, time and text.
    func unstored(_ entries: [NewEntry]) throws -> [NewEntry] {
        let stored = Set(try db.execute(
            """
            SELECT v.k FROM unnest(\(entries.map(\.device))::text[], \(entries.map(\.at))::timestamptz[], \(entries.map(\.message))::text[])
                WITH ORDINALITY AS v(d, a, m, k)
            WHERE EXISTS (SELECT 1 FROM timeline_entries t WHERE t.device_id = v.d AND t.at = v.a AND t.message = v.m)
            """).records.map { Int(try $0.int64("k")) - 1 })
        return entries.enumerated().filter { !stored.contains($0.offset) }.map(\.element)
    }

    /// `append`, inside the caller's transaction: a household change and its entry commit together.
    @discardableResult
    public func appendWithin(_ entries: [NewEntry]) throws -> [Stored] {
        guard !entries.isEmpty else { return [] }
        let devices = Array(Set(entries.map(\.device))).sorted { $0.rawValue < $1.rawValue }
        do {
            // The devices' rows first, in one order, as every household change locks them: a
            // batch and a change of the same device wait for each other instead of deadlocking.
            try db.execute("SELECT id FROM devices WHERE id = ANY (\(devices)::text[]) ORDER BY id FOR KEY SHARE")
            let fresh = Set(try db.execute(
                """
                INSERT INTO timeline_devices (device_id) SELECT d.id FROM devices d
                WHERE d.id = ANY (\(devices)::text[]) AND d.disabled_at IS NULL ON CONFLICT DO NOTHING RETURNING device_id
                """).records.map { try $0.deviceID("device_id") })
            var state: [DeviceID: (next: Int64, offline: Bool, erased: UnixTime?)] = [:]
            for row in try db.execute(
                """
                SELECT t.device_id, t.next_number, t.robot_offline, t.erased_at FROM timeline_devices t JOIN devices d ON d.id = t.device_id
                WHERE t.device_id = ANY (\(devices)::text[]) AND d.disabled_at IS NULL ORDER BY t.device_id FOR UPDATE OF t
                """).records {
                state[try row.deviceID("device_id")] = (try row.int64("next_number"), try row.bool("robot_offline"), try row.optionalTime("erased_at"))
            }
            var kept: [(entry: NewEntry, number: Int64)] = []
            var stored: [DeviceID: Stored] = [:]
            for entry in entries {
                guard var device = state[entry.device], device.erased.map({ entry.at >= $0 }) ?? true else { continue }
                switch entry.condition {
                case .always: break
                case .robotBack:
                    guard device.offline || fresh.contains(entry.device) else { continue }
                    device.offline = false
                case .robotGone(let since):
                    guard !device.offline, try !robotBack(entry.device, since: since) else { continue }
                    device.offline = true
                }
                kept.append((entry, device.next))
                var summary = stored[entry.device] ?? Stored(device: entry.device, newest: device.next, newestForGuests: nil)
                summary.newest = device.next
                if !TimelineEntry.isHouseholdChange(entry.event, source: entry.source) { summary.newestForGuests = device.next }
                stored[entry.device] = summary
                device.next += 1
                state[entry.device] = device
            }
            guard !kept.isEmpty else { return [] }
            try db.execute(
                """
                INSERT INTO timeline_entries (device_id, number, at, source, event, message, household)
                SELECT d, n, a, s, e, m, s = 'relay' AND e = ANY (\(TimelineEntry.householdEvents)::text[])
                FROM unnest(\(kept.map(\.entry.device))::text[], \(kept.map(\.number))::bigint[], \(kept.map(\.entry.at))::timestamptz[],
                            \(kept.map(\.entry.source.rawValue))::text[], \(kept.map(\.entry.event))::text[],
                            \(kept.map(\.entry.message))::text[]) AS v(d, n, a, s, e, m)
                """)
            let touched = Array(stored.keys)
            try db.execute(
                """
                UPDATE timeline_devices t SET next_number = v.n, robot_offline = v.o::boolean
                FROM unnest(\(touched)::text[], \(touched.map { state[$0]!.next })::bigint[],
                            \(touched.map { state[$0]!.offline ? "t" : "f" })::text[]) AS v(d, n, o)
                WHERE t.device_id = v.d
                """)
            let notices = stored.values.map { StoreNotification.timeline($0.device, newest: $0.newest, newestForGuests: $0.newestForGuests).payload }
            try db.execute("SELECT pg_notify(\(StoreNotification.credentialsChannel), p) FROM unnest(\(notices)::text[]) AS p")
            return stored.values.sorted { $0.device.rawValue < $1.device.rawValue }
        }
    }

    /// A household change's entry (`member_joined`, `member_changed`, `member_left`), inside the
    /// change's transaction, with the member's `token_id`, `label`, `access`, `control`, `until`;
    /// none for a sealed device, whose `roster` entries say it (`SealedRepository.addEpoch`).
    public func householdChange(_ event: String, device: DeviceID, member: TokenRecord) throws {
        guard try SealedRepository(db).currentEpoch(device: device) == nil else { return }
        let message = JSONValue.object([("type", "event"), ("event", .string(event)), ("data", .object(member.memberFields(labelled: true)))])
        try appendWithin([NewEntry(device: device, at: db.clock.wall(), source: .relay, event: event, message: message.encoded)])
    }

    /// Whether the device's robot connected on a live node at or after `since`.
    private func robotBack(_ device: DeviceID, since: UnixTime) throws -> Bool {
        try db.execute(
            """
            SELECT EXISTS (SELECT 1 FROM device_presence p JOIN relay_nodes n ON n.node_id = p.node_id
                           WHERE p.device_id = \(device) AND p.robot_since >= \(since)::timestamptz AND n.lease_expires_at > now()) AS back
            """).single().bool("back")
    }

    /// What decides where a caller's view begins (docs/protocol.md: the latest of now − the
    /// device's days, its last erase, the moment since which the relay holds every entry, and for
    /// a guest the moment it became one).
    public struct Window: Sendable, Equatable {
        /// The device's retention in days (nil: the relay's default).
        public var days: Int?
        public var erasedAt: UnixTime?
        public var keptSince: UnixTime
        /// When the caller's token became a guest's (nil: not a guest).
        public var guestSince: UnixTime?
    }

    /// The window of `device` for app token `token`.
    public func window(device: DeviceID, token: Int64) throws -> Window {
        let row = try db.execute(
            """
            SELECT t.days, t.erased_at, (SELECT min(started_at) FROM timeline_started) AS kept_since,
                   (SELECT k.guest_since FROM tokens k WHERE k.id = \(token)::bigint AND k.access = 'guest') AS guest_since
            FROM (SELECT 1) AS one LEFT JOIN timeline_devices t ON t.device_id = \(device)
            """).single()
        return Window(days: try row.optionalInt64("days").map { Int($0) }, erasedAt: try row.optionalTime("erased_at"),
                      keptSince: try row.time("kept_since"), guestSince: try row.optionalTime("guest_since"))
    }

    /// One page of `device`'s entries from `begins` on: after `cursor` oldest first, or before it
    /// newest first (nil: from the oldest, or the newest), only `events` when given, none of the
    /// household's changes for a guest. Up to `limit`, and whether more follow.
    public func page(device: DeviceID, begins: UnixTime, cursor: Int64?, newestFirst: Bool, limit: Int, events: [String]?,
                     guest: Bool) throws -> (entries: [TimelineEntry], more: Bool) {
        let bound: PGQuery = switch (cursor, newestFirst) {
        case (nil, _): "true"
        case (let cursor?, true): "number < \(cursor)::bigint"
        case (let cursor?, false): "number > \(cursor)::bigint"
        }
        let order: PGQuery = newestFirst ? "number DESC" : "number"
        let rows = try db.execute(
            """
            SELECT number, at, source, event, message FROM timeline_entries
            WHERE device_id = \(device) AND at >= \(begins)::timestamptz AND \(bound)
              AND (\(events)::text[] IS NULL OR event = ANY (\(events)::text[])) AND NOT (household AND \(guest)::boolean)
            ORDER BY \(order) LIMIT \(limit + 1)::int
            """).records
        let entries = try rows.prefix(limit).map { row in
            TimelineEntry(device: device, number: try row.int64("number"), at: try row.time("at"),
                          source: try row.value("source"), event: try row.string("event"), message: try row.string("message"))
        }
        return (entries, rows.count > limit)
    }

    /// The device's retention in days (nil: the relay's default).
    public func days(device: DeviceID) throws -> Int? {
        try db.execute("SELECT days FROM timeline_devices WHERE device_id = \(device)").firstRecord?.optionalInt64("days").map { Int($0) }
    }

    /// Sets the device's retention; audited `timeline_settings_changed` with the owner's token.
    public func setDays(device: DeviceID, _ days: Int, by token: Int64, address: String?) throws {
        try db.transaction {
            try db.execute(
                """
                INSERT INTO timeline_devices (device_id, days) VALUES (\(device), \(days)::int)
                ON CONFLICT (device_id) DO UPDATE SET days = EXCLUDED.days
                """)
            try AuditRepository(db).append([
                AuditRepository.event(.timelineSettingsChanged, at: db.clock.wall(), actor: "app", deviceID: device.rawValue, tokenID: token,
                                      remoteAddress: address, details: .object([("days", .int(Int64(days)))])),
            ])
        }
    }

    /// Erases every entry of the device; its numbers go on (an erased ID stays a valid cursor).
    /// Audited `timeline_erased` with how many went.
    public func erase(device: DeviceID, by token: Int64, address: String?) throws {
        try db.transaction {
            let erased = try eraseWithin(device: device)
            try AuditRepository(db).append([
                AuditRepository.event(.timelineErased, at: db.clock.wall(), actor: "app", deviceID: device.rawValue, tokenID: token,
                                      remoteAddress: address, details: .object([("entries", .int(Int64(erased)))])),
            ])
        }
    }

    /// Erases the device's entries inside the caller's transaction (an owner's erase, the device
    /// disabled): what was received before now is dropped, also from batches still on their way.
    @discardableResult
    public func eraseWithin(device: DeviceID) throws -> Int {
        let now = db.clock.wall()
        try db.execute(
            """
            INSERT INTO timeline_devices (device_id, erased_at) VALUES (\(device), \(now)::timestamptz)
            ON CONFLICT (device_id) DO UPDATE SET erased_at = EXCLUDED.erased_at
            """)
        return try db.execute("DELETE FROM timeline_entries WHERE device_id = \(device) AND at < \(now)::timestamptz").affected
    }

    /// What an operator sees of a device's timeline: how many entries, their bytes, the oldest
    /// and newest times, its own retention and last erase — never an entry's contents.
    public struct Summary: Sendable, Equatable {
        public var entries: Int64
        public var bytes: Int64
        public var oldest: UnixTime?
        public var newest: UnixTime?
        /// The device's own retention (nil: the relay's default).
        public var days: Int?
        public var erasedAt: UnixTime?

        public var json: JSONValue {
            let days: JSONValue = self.days.map { JSONValue.int(Int64($0)) } ?? JSONValue.null
            return .object([("entries", .int(entries)), ("bytes", .int(bytes)), ("oldest", .optional(oldest?.iso8601)),
                            ("newest", .optional(newest?.iso8601)), ("days", days), ("erased_at", .optional(erasedAt?.iso8601))])
        }
    }

    public func summary(device: DeviceID) throws -> Summary {
        let row = try db.execute(
            """
            SELECT count(*) AS entries, coalesce(sum(pg_column_size(e.message)), 0)::bigint AS bytes, min(e.at) AS oldest, max(e.at) AS newest,
                   (SELECT days FROM timeline_devices WHERE device_id = \(device)) AS days,
                   (SELECT erased_at FROM timeline_devices WHERE device_id = \(device)) AS erased_at
            FROM timeline_entries e WHERE e.device_id = \(device)
            """).single()
        return Summary(entries: try row.int64("entries"), bytes: try row.int64("bytes"), oldest: try row.optionalTime("oldest"),
                       newest: try row.optionalTime("newest"), days: try row.optionalInt64("days").map { Int($0) },
                       erasedAt: try row.optionalTime("erased_at"))
    }
}
