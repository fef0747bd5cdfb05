/// Cluster membership and presence values (docs/cluster.md), shared by the store, which
/// writes and reads them, and the server, which produces them.

/// A node id or address as stored in `relay_nodes`: `[A-Za-z0-9_.:-]{1,128}` (no spaces, so it
/// can sit in a notification payload as one word).
public enum NodeName {
    public static func isValid(_ text: String) -> Bool {
        guard (1...128).contains(text.utf8.count) else { return false }
        return text.utf8.allSatisfy { c in
            (c >= 48 && c <= 57) || (c >= 65 && c <= 90) || (c >= 97 && c <= 122)
                || c == UInt8(ascii: "_") || c == UInt8(ascii: ".") || c == UInt8(ascii: ":") || c == UInt8(ascii: "-")
        }
    }
}

/// This node's part of one device's presence, as one `device_presence` row.
public struct PresenceRow: Sendable, Equatable {
    public var deviceID: DeviceID
    /// Since when this node holds the device's robot (nil: no robot here).
    public var robotSince: UnixTime?
    public var apps: Int
    /// Set when the robot went offline on this node since the last batch.
    public var robotLeftAt: UnixTime?

    public init(deviceID: DeviceID, robotSince: UnixTime?, apps: Int, robotLeftAt: UnixTime? = nil) {
        self.deviceID = deviceID
        self.robotSince = robotSince
        self.apps = apps
        self.robotLeftAt = robotLeftAt
    }

    /// No socket of the device is left on this node: the row is deleted.
    public var isEmpty: Bool { robotSince == nil && apps == 0 }
}

/// What a node that gives a device up leaves for the node that claimed it, so the device's apps
/// keep their `device_status.since` and replayed events across the move.
public struct DeviceHandoff: Sendable, Equatable {
    public var deviceID: DeviceID
    public var toNode: String
    public var statusSince: UnixTime
    public var robotOnline: Bool
    /// Replayed events, verbatim (text frames).
    public var replay: [[UInt8]]
    /// The missed-event history, so resuming apps recover on the new node.
    public var history: HistoryHandoff?

    public init(deviceID: DeviceID, toNode: String, statusSince: UnixTime, robotOnline: Bool, replay: [[UInt8]],
                history: HistoryHandoff? = nil) {
        self.deviceID = deviceID
        self.toNode = toNode
        self.statusSince = statusSince
        self.robotOnline = robotOnline
        self.replay = replay
        self.history = history
    }
}

/// A device's numbered history as a hand-off carries it: the epoch, the last number, and the
/// held messages oldest first with their age (so the 120 s bound holds across the move).
public struct HistoryHandoff: Sendable, Equatable {
    public var epoch: String
    public var lastSeq: UInt64
    public var entries: [(seq: UInt64, ageNanos: UInt64, bytes: [UInt8])]

    public init(epoch: String, lastSeq: UInt64, entries: [(seq: UInt64, ageNanos: UInt64, bytes: [UInt8])]) {
        self.epoch = epoch
        self.lastSeq = lastSeq
        self.entries = entries
    }

    public static func == (a: HistoryHandoff, b: HistoryHandoff) -> Bool {
        a.epoch == b.epoch && a.lastSeq == b.lastSeq && a.entries.map(\.seq) == b.entries.map(\.seq)
            && a.entries.map(\.bytes) == b.entries.map(\.bytes)
    }

    /// As the store keeps it: `{"epoch":E,"last_seq":N,"entries":[{"seq":N,"age_ms":MS,"text":T},…]}`.
    public var json: JSONValue {
        .object([("epoch", .string(epoch)), ("last_seq", .int(Int64(lastSeq))),
                 ("entries", .array(entries.map { e in
                     .object([("seq", .int(Int64(e.seq))), ("age_ms", .int(Int64(e.ageNanos / 1_000_000))),
                              ("text", .string(String(decoding: e.bytes, as: UTF8.self)))])
                 }))])
    }

    /// Reads `json`'s form back; nil for anything else.
    public init?(json: JSONValue) {
        guard let epoch = json.member("epoch")?.stringValue, let last = json.member("last_seq")?.intValue, last >= 0,
              case .array(let items)? = json.member("entries") else { return nil }
        var entries: [(seq: UInt64, ageNanos: UInt64, bytes: [UInt8])] = []
        for item in items {
            guard let seq = item.member("seq")?.intValue, seq > 0, let age = item.member("age_ms")?.intValue, age >= 0,
                  let text = item.member("text")?.stringValue else { return nil }
            entries.append((UInt64(seq), UInt64(age) * 1_000_000, Array(text.utf8)))
        }
        self.init(epoch: epoch, lastSeq: UInt64(last), entries: entries)
    }
}

/// A claim heard from another node: it accepted the first socket of each of `devices` on it.
public struct DeviceClaim: Sendable, Equatable {
    public var node: String
    public var devices: [DeviceID]

    public init(node: String, devices: [DeviceID]) {
        self.node = node
        self.devices = devices
    }
}

/// A member of the cluster as `relay_nodes` records it.
public struct ClusterNode: Sendable, Equatable {
    public var nodeID: String
    public var address: String
    public var startedAt: UnixTime
    public var renewedAt: UnixTime
    public var leaseExpiresAt: UnixTime
    public var draining: Bool
    public var sockets: Int
    public var devices: Int
    /// Seconds since the last renewal, by the database's clock.
    public var leaseAgeSeconds: Double
    public var isLive: Bool

    public init(nodeID: String, address: String, startedAt: UnixTime, renewedAt: UnixTime, leaseExpiresAt: UnixTime,
                draining: Bool, sockets: Int, devices: Int, leaseAgeSeconds: Double, isLive: Bool) {
        self.nodeID = nodeID
        self.address = address
        self.startedAt = startedAt
        self.renewedAt = renewedAt
        self.leaseExpiresAt = leaseExpiresAt
        self.draining = draining
        self.sockets = sockets
        self.devices = devices
        self.leaseAgeSeconds = leaseAgeSeconds
        self.isLive = isLive
    }
}

/// A device's presence over every live node.
public struct ClusterPresence: Sendable, Equatable {
    public var deviceID: DeviceID
    public var online: Bool
    /// Online: since when the robot is connected; offline: since when it is not (nil: never seen).
    public var since: UnixTime?
    public var apps: Int
    /// Live nodes holding a socket of the device (more than one: split, converging).
    public var nodes: [String]

    public init(deviceID: DeviceID, online: Bool, since: UnixTime?, apps: Int, nodes: [String]) {
        self.deviceID = deviceID
        self.online = online
        self.since = since
        self.apps = apps
        self.nodes = nodes
    }
}
