import RelayCore

/// The robot's last-known state in the store (docs/protocol.md v1.2 "What the robot last said"): one row per
/// device and replayed event name, the message verbatim. A newer arrival wins, whichever node
/// writes last (a device moving between nodes may be written by both for a moment).
public struct StateRepository {
    let db: PGConnection

    public init(_ db: PGConnection) { self.db = db }

    /// Saves every event of `states` in one statement. Devices that no longer exist are skipped.
    public func save(_ states: [(device: DeviceID, events: [DeviceHub.KnownEvent])]) throws {
        var rows: [JSONValue] = []
        for state in states {
            for event in state.events {
                rows.append(.object([("d", .string(state.device.rawValue)), ("n", .string(event.name)),
                                     ("m", .string(String(decoding: event.message, as: UTF8.self))),
                                     ("t", .int(event.receivedAt.microseconds))]))
            }
        }
        guard !rows.isEmpty else { return }
        try db.execute(
            """
            INSERT INTO device_state_events (device_id, name, message, received_at)
            SELECT r.d, r.n, r.m, to_timestamp(r.t / 1e6)
            FROM jsonb_to_recordset(\(JSONValue.array(rows))::jsonb) AS r (d text, n text, m text, t bigint)
            WHERE EXISTS (SELECT 1 FROM devices WHERE id = r.d)
            ON CONFLICT (device_id, name) DO UPDATE SET message = EXCLUDED.message, received_at = EXCLUDED.received_at
            WHERE EXCLUDED.received_at >= device_state_events.received_at
            """)
    }

    /// `device`'s stored events, by name.
    public func events(of device: DeviceID) throws -> [DeviceHub.KnownEvent] {
        try db.execute("SELECT name, message, received_at FROM device_state_events WHERE device_id = \(device) ORDER BY name").records.map { row in
            DeviceHub.KnownEvent(name: try row.string("name"), message: Array(try row.string("message").utf8),
                                 receivedAt: try row.time("received_at"))
        }
    }
}
