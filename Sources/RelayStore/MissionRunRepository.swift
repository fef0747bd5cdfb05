import RelayCore
import WimzProtocol

/// Open mission runs (docs/protocol.md v1.4 "A mission run"; migrations/0013_live_activities.sql):
/// one row per device with a run open, its state kept as the content state's JSON. Deleting a
/// row notifies every node (`run:<device>`), which forgets what it held.
public struct MissionRunRepository {
    let db: PGConnection

    public init(_ db: PGConnection) { self.db = db }

    /// The open run of `device`, if any, and the device's name (what a push-to-start shows).
    public func run(of device: DeviceID) throws -> (run: MissionRun?, name: String) {
        try runs(of: [device])[device].map { ($0.run, $0.name) } ?? (nil, "")
    }

    /// `run(of:)` for several devices in one statement (a device that no longer exists is left out),
    /// with each device's sealed epoch (v1.5; nil: not sealed).
    public func runs(of devices: [DeviceID]) throws -> [DeviceID: ArrivingDevice] {
        guard !devices.isEmpty else { return [:] }
        var found: [DeviceID: ArrivingDevice] = [:]
        // The sealed epoch (v1.5) and the settings' versions (v1.6) ride along: one statement per
        // batch of arriving devices, not three.
        for row in try db.executePrepared(
            """
            SELECT d.id, r.opened_at, r.state::text AS state, d.name,
                   (SELECT max(e.epoch) FROM sealed_epochs e WHERE e.device_id = d.id) AS sealed_epoch,
                   s.desired_version, s.reported_version
            FROM devices d LEFT JOIN device_mission_runs r ON r.device_id = d.id LEFT JOIN device_settings s ON s.device_id = d.id
            WHERE d.id = ANY (\(devices)::text[])
            """).records {
            let settings = try row.optionalInt64("desired_version").map {
                SettingsVersions(desired: $0, reported: try row.optionalInt64("reported_version"))
            }
            found[try row.deviceID("id")] = ArrivingDevice(run: try Self.decode(row), name: try row.string("name"),
                                                           sealedEpoch: try row.optionalInt64("sealed_epoch").map { Int($0) },
                                                           settings: settings)
        }
        return found
    }

    /// What `runs(of:)` reads of each arriving device besides its registrations.
    public struct ArrivingDevice: Sendable {
        public var run: MissionRun?
        public var name: String
        public var sealedEpoch: Int?
        public var settings: SettingsVersions?
    }

    /// Writes what changed since the last call: `open` runs as they are now, `ended` devices' rows
    /// gone. One transaction.
    public func write(open: [(DeviceID, MissionRun)], ended: [DeviceID]) throws {
        guard !open.isEmpty || !ended.isEmpty else { return }
        try db.transaction {
            if !ended.isEmpty {
                try db.executePrepared("DELETE FROM device_mission_runs WHERE device_id = ANY (\(ended)::text[])")
            }
            if !open.isEmpty {
                try db.executePrepared(
                    """
                    INSERT INTO device_mission_runs (device_id, opened_at, state)
                    SELECT * FROM unnest(\(open.map(\.0))::text[], \(open.map(\.1.openedAt))::timestamptz[],
                                         \(open.map(\.1.state.contentState))::jsonb[])
                    ON CONFLICT (device_id) DO UPDATE SET state = EXCLUDED.state, opened_at = EXCLUDED.opened_at, updated_at = now()
                    """)
            }
        }
    }

    /// Ends the run of every device whose robot left at least `seconds` ago and is not back on
    /// any live node: the rows are deleted and returned (their state marked offline), so exactly
    /// one node ends each — also when the device's node died.
    public func claimGone(after seconds: Double) throws -> [(DeviceID, MissionRun)] {
        try db.execute(
            """
            DELETE FROM device_mission_runs r USING device_robot_left l
            WHERE r.device_id = l.device_id AND l.left_at <= now() - make_interval(secs => \(seconds)::double precision)
              AND NOT EXISTS (SELECT 1 FROM device_presence p JOIN relay_nodes n USING (node_id)
                              WHERE p.device_id = r.device_id AND p.robot_since IS NOT NULL AND n.lease_expires_at > now())
            RETURNING r.device_id, r.opened_at, r.state::text AS state
            """).records.compactMap { row -> (DeviceID, MissionRun)? in
                guard var run = try Self.decode(row) else { return nil }
                run.state.robotOnline = false
                return (try row.deviceID("device_id"), run)
            }
    }

    /// The run a row holds: nil without one (the LEFT JOIN's NULLs) or with a state this build
    /// cannot read.
    static func decode(_ row: PGRow) throws -> MissionRun? {
        guard let opened = try row.optionalTime("opened_at"), let text = try row.optionalString("state"),
              let json = try? JSONReader.parse(Array(text.utf8)), let state = MissionState(contentState: json) else { return nil }
        return MissionRun(state: state, openedAt: opened)
    }
}
