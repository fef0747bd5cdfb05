import Foundation
import RelayCore

/// Membership leases, presence and handoffs (migrations/0003_cluster.sql, docs/cluster.md).
/// A node is live while its lease has not run out by the database's clock; every query here
/// looks at live nodes only, so a dead node's presence is gone the moment its lease is.
public struct ClusterRepository {
    let db: PGConnection

    public init(_ db: PGConnection) { self.db = db }

    /// Largest payload PostgreSQL takes is 8000 bytes; claims are split below that.
    static let maxPayload = 7_800

    /// Joins (or rejoins) the cluster. A previous life of the same node id is removed first;
    /// its robots are recorded as gone offline now.
    public func register(node: String, incarnation: String, address: String, leaseSeconds: Double) throws {
        try db.transaction {
            try recordRobotsLeft(ofNodes: "node_id = \(node)", at: "now()")
            try db.execute("DELETE FROM relay_nodes WHERE node_id = \(node)")
            try deletePresence(ofNodes: [node])
            try db.execute(
                """
                INSERT INTO relay_nodes (node_id, incarnation, address, started_at, renewed_at, lease_expires_at)
                VALUES (\(node), \(incarnation)::uuid, \(address), now(), now(), now() + \(leaseSeconds)::float8 * interval '1 second')
                """)
        }
    }

    /// Extends this node's lease and reports its size. False when the row is gone or belongs to
    /// another incarnation (the lease ran out and a peer removed it): register again.
    public func renew(node: String, incarnation: String, leaseSeconds: Double, sockets: Int, devices: Int,
                      draining: Bool) throws -> Bool {
        try db.execute(
            """
            UPDATE relay_nodes SET renewed_at = now(), lease_expires_at = now() + \(leaseSeconds)::float8 * interval '1 second',
                   sockets = \(sockets)::int, devices = \(devices)::int, draining = \(draining)::boolean
            WHERE node_id = \(node) AND incarnation = \(incarnation)::uuid
            """
        ).affected == 1
    }

    /// Removes nodes whose lease ran out (and with them their presence); their robots are
    /// recorded as gone offline when the lease ended. Returns the ids removed.
    @discardableResult
    public func purgeExpired() throws -> [String] {
        try db.transaction {
            try recordRobotsLeft(ofNodes: "lease_expires_at < now()", at: "n.lease_expires_at")
            let gone = try db.execute("DELETE FROM relay_nodes WHERE lease_expires_at < now() RETURNING node_id")
                .records.map { try $0.string("node_id") }
            try deletePresence(ofNodes: gone)
            return gone
        }
    }

    /// Leaves the cluster (graceful stop): presence goes, robots are recorded offline now.
    public func deregister(node: String, incarnation: String) throws {
        try db.transaction {
            let this: PGQuery = "node_id = \(node) AND incarnation = \(incarnation)::uuid"
            try recordRobotsLeft(ofNodes: this, at: "now()")
            let gone = try db.execute("DELETE FROM relay_nodes WHERE \(this) RETURNING node_id").records.map { try $0.string("node_id") }
            try deletePresence(ofNodes: gone)
        }
    }

    /// The presence of nodes whose rows were just deleted (what the foreign key's cascade did
    /// before migration 0009). A statement of its own, after the node rows' delete: it reads
    /// a new snapshot, so it also sees rows that a presence batch, whose node-row lock that
    /// delete waited for, committed in between.
    private func deletePresence(ofNodes nodes: [String]) throws {
        guard !nodes.isEmpty else { return }
        try db.execute("DELETE FROM device_presence WHERE node_id = ANY (\(nodes)::text[])")
    }

    /// Records the robots on the nodes `condition` selects (of `relay_nodes`) as gone at `time`
    /// (an expression over `n`, the node's row).
    private func recordRobotsLeft(ofNodes condition: PGQuery, at time: PGQuery) throws {
        try db.execute(
            """
            INSERT INTO device_robot_left (device_id, left_at)
            SELECT p.device_id, \(time) FROM device_presence p JOIN relay_nodes n USING (node_id)
            WHERE p.robot_since IS NOT NULL AND n.node_id IN (SELECT node_id FROM relay_nodes WHERE \(condition))
            ON CONFLICT (device_id) DO UPDATE SET left_at = GREATEST(device_robot_left.left_at, EXCLUDED.left_at)
            """)
    }

    /// Writes one batch of this node's presence: at most three statements whatever its size.
    /// Returns how many statements ran.
    @discardableResult
    public func writePresence(node: String, _ rows: [PresenceRow]) throws -> Int {
        guard !rows.isEmpty else { return 0 }
        let held = rows.filter { !$0.isEmpty }
        let gone = rows.filter(\.isEmpty)
        let left = rows.compactMap { row in row.robotLeftAt.map { (row.deviceID, $0) } }
        var statements = 0
        try db.transaction {
            // The node's row is locked once for the batch (what the foreign key did per row): a
            // purge of this node waits for the batch and then deletes its rows with the rest.
            guard try db.executePrepared("SELECT 1 FROM relay_nodes WHERE node_id = \(node) FOR KEY SHARE").rows.count == 1 else {
                throw StoreError(.conflict, "node \(node) is not registered")
            }
            if !held.isEmpty {
                try db.executePrepared(
                    """
                    INSERT INTO device_presence (device_id, node_id, robot_since, apps, updated_at)
                    SELECT d, \(node), to_timestamp(s / 1e6), a, now()
                    FROM unnest(\(held.map(\.deviceID))::text[], \(held.map { $0.robotSince?.microseconds })::bigint[],
                                \(held.map { Int32(clamping: $0.apps) })::int[]) AS t (d, s, a)
                    ON CONFLICT (device_id, node_id) DO UPDATE
                    SET robot_since = EXCLUDED.robot_since, apps = EXCLUDED.apps, updated_at = now()
                    """)
                statements += 1
            }
            if !gone.isEmpty {
                try db.executePrepared("DELETE FROM device_presence WHERE node_id = \(node) AND device_id = ANY (\(gone.map(\.deviceID))::text[])")
                statements += 1
            }
            if !left.isEmpty {
                try db.executePrepared(
                    """
                    INSERT INTO device_robot_left (device_id, left_at)
                    SELECT d, to_timestamp(t / 1e6) FROM unnest(\(left.map(\.0))::text[], \(left.map(\.1.microseconds))::bigint[]) AS x (d, t)
                    ON CONFLICT (device_id) DO UPDATE SET left_at = GREATEST(device_robot_left.left_at, EXCLUDED.left_at)
                    """)
                statements += 1
            }
        }
        return statements
    }

    /// Announces that `node` accepted the first socket of `devices` (as few notifications as fit).
    public func claim(node: String, _ devices: [DeviceID]) throws {
        let emptySize = StoreNotification.claim(node: node, devices: []).payload.utf8.count
        var chunk: [DeviceID] = []
        var size = emptySize
        for device in devices {
            if size + 1 + device.rawValue.utf8.count > Self.maxPayload {
                try notify(.claim(node: node, devices: chunk))
                chunk.removeAll()
                size = emptySize
            }
            chunk.append(device)
            size += 1 + device.rawValue.utf8.count
        }
        if !chunk.isEmpty { try notify(.claim(node: node, devices: chunk)) }
    }

    /// Leaves devices' state for the nodes that claimed them and tells those nodes.
    public func handOff(_ handoffs: [DeviceHandoff]) throws {
        guard !handoffs.isEmpty else { return }
        try db.transaction {
            for h in handoffs {
                let replay = JSONValue.array(h.replay.map { .string(String(decoding: $0, as: UTF8.self)) })
                try db.execute(
                    """
                    INSERT INTO device_handoffs (to_node, device_id, status_since, robot_online, replay, history)
                    VALUES (\(h.toNode), \(h.deviceID), \(h.statusSince)::timestamptz, \(h.robotOnline)::boolean, \(replay)::jsonb,
                            \(h.history?.json)::jsonb)
                    """)
            }
            for node in Set(handoffs.map(\.toNode)) { try notify(.handoff(toNode: node)) }
        }
    }

    /// Takes (deletes and returns) the handoffs left for `node`.
    public func takeHandoffs(node: String) throws -> [DeviceHandoff] {
        try db.execute(
            """
            DELETE FROM device_handoffs WHERE to_node = \(node)
            RETURNING device_id, status_since, robot_online, replay::text AS replay, history::text AS history
            """
        ).records.map { row in
            let replay = try row.optionalString("replay") ?? "[]"
            let events = (try? JSONReader.parse(Array(replay.utf8)))?.arrayValue?.compactMap(\.stringValue) ?? []
            let history = try row.optionalString("history").flatMap { try? JSONReader.parse(Array($0.utf8)) }
                .flatMap(HistoryHandoff.init(json:))
            return DeviceHandoff(deviceID: try row.deviceID("device_id"), toNode: node, statusSince: try row.time("status_since"),
                                 robotOnline: try row.bool("robot_online"), replay: events.map { Array($0.utf8) }, history: history)
        }
    }

    /// Handoffs nobody took within a minute (their node died) are dropped.
    public func pruneHandoffs() throws {
        try db.execute("DELETE FROM device_handoffs WHERE created_at < now() - interval '1 minute'")
    }

    private func notify(_ notification: StoreNotification) throws {
        try db.execute("SELECT pg_notify(\(notification.channel), \(notification.payload))")
    }

    /// Every node row, live or not yet purged, oldest first.
    public func nodes() throws -> [ClusterNode] {
        try db.execute(
            """
            SELECT node_id, address, started_at, renewed_at, lease_expires_at, draining, sockets, devices,
                   extract(epoch FROM now() - renewed_at)::float8 AS lease_age, lease_expires_at > now() AS live
            FROM relay_nodes ORDER BY started_at, node_id
            """
        ).records.map { row in
            ClusterNode(nodeID: try row.string("node_id"), address: try row.string("address"), startedAt: try row.time("started_at"),
                        renewedAt: try row.time("renewed_at"), leaseExpiresAt: try row.time("lease_expires_at"),
                        draining: try row.bool("draining"), sockets: try row.int("sockets"), devices: try row.int("devices"),
                        leaseAgeSeconds: try row.double("lease_age"), isLive: try row.bool("live"))
        }
    }

    /// Presence of each of `devices` over the live nodes (all devices when nil).
    public func presence(of devices: [DeviceID]?) throws -> [DeviceID: ClusterPresence] {
        let rows = try db.execute(
            """
            SELECT p.device_id, min(p.robot_since) AS robot_since, sum(p.apps)::int AS apps,
                   string_agg(p.node_id, ' ' ORDER BY p.node_id) AS nodes, bool_or(p.robot_since IS NOT NULL) AS online,
                   max(l.left_at) AS left_at
            FROM device_presence p JOIN relay_nodes n USING (node_id)
            LEFT JOIN device_robot_left l USING (device_id)
            WHERE n.lease_expires_at > now() AND (\(devices)::text[] IS NULL OR p.device_id = ANY (\(devices)::text[]))
            GROUP BY p.device_id
            UNION ALL
            SELECT l.device_id, NULL, 0, '', false, l.left_at FROM device_robot_left l
            WHERE (\(devices)::text[] IS NULL OR l.device_id = ANY (\(devices)::text[]))
              AND NOT EXISTS (SELECT 1 FROM device_presence p JOIN relay_nodes n USING (node_id)
                              WHERE p.device_id = l.device_id AND n.lease_expires_at > now())
            UNION ALL
            -- A robot on a node whose lease ran out, before any live node recorded its departure:
            -- it left when that lease ended.
            SELECT p.device_id, NULL, 0, '', false, max(n.lease_expires_at)
            FROM device_presence p JOIN relay_nodes n USING (node_id)
            WHERE n.lease_expires_at <= now() AND p.robot_since IS NOT NULL
              AND (\(devices)::text[] IS NULL OR p.device_id = ANY (\(devices)::text[]))
              AND NOT EXISTS (SELECT 1 FROM device_presence q JOIN relay_nodes m USING (node_id)
                              WHERE q.device_id = p.device_id AND m.lease_expires_at > now())
            GROUP BY p.device_id
            """)
        var out: [DeviceID: ClusterPresence] = [:]
        for row in rows.records {
            let device = try row.deviceID("device_id"), online = try row.bool("online")
            let presence = ClusterPresence(deviceID: device, online: online,
                                           since: online ? try row.optionalTime("robot_since") : try row.optionalTime("left_at"),
                                           apps: try row.int("apps"),
                                           nodes: (try row.optionalString("nodes") ?? "").split(separator: " ").map(String.init))
            // Two offline rows of one device (a recorded departure, a dead node's): the later one.
            if let earlier = out[device], !earlier.online, !online, (earlier.since ?? .init(microseconds: 0)) > (presence.since ?? .init(microseconds: 0)) {
                continue
            }
            out[device] = presence
        }
        return out
    }

    /// Devices with sockets on more than one live node right now.
    public func splitDevices() throws -> Int {
        try db.execute(
            """
            SELECT count(*) AS split FROM (SELECT device_id FROM device_presence p JOIN relay_nodes n USING (node_id)
                                           WHERE n.lease_expires_at > now() GROUP BY device_id HAVING count(*) > 1) s
            """
        ).single().int("split")
    }
}
