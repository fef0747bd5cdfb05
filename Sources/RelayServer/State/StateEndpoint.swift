import RelayCore
import RelayStore
import RelayWorkers

/// The robot's last-known state (docs/protocol.md v1.2 "What the robot last said"):
///
///     GET /api/devices/{device_id}/state   robot or app token of that device →
///     200 {"device_id","online","last_seen":ISO8601|null,
///          "events":{NAME:{"message":OBJ,"received_at":ISO8601},…}}
///
/// The replayed events live in the hub; once a second the changed devices go to the
/// `StateWriter` (write-behind on the database worker, batched: at most one write per device a second, and the last one
/// when the relay stops). A request merges what this node holds (freshest) with the store (what
/// any node wrote, also after a restart) and the cluster's presence; without the database, this
/// node's own view.
final class StateEndpoint {
    let writer: StateWriter
    private let env: RelayEnvironment
    private let hub: DeviceHub
    private let database: DatabaseExchanges

    init(env: RelayEnvironment, hub: DeviceHub, database: DatabaseExchanges) {
        self.env = env
        self.hub = hub
        self.database = database
        writer = StateWriter(worker: database.worker)
    }

    /// Hands the devices whose replayed events changed to the writer (the 1 s tick, and at stop).
    func flush() {
        writer.submit(hub.takeChangedState(now: env.clock.monotonic(), wallClock: env.clock.wall()))
    }

    /// `GET /api/devices/{device_id}/state` (a token of `device`, checked by the router).
    func state(_ request: HTTPRequest, device: DeviceID) -> HTTPResponse? {
        let wall = env.clock.wall()
        let local = hub.knownEvents(of: device, now: env.clock.monotonic(), wallClock: wall)
        let onlineHere = hub.status(of: device).online
        let nodeView = Self.body(device, online: onlineHere, lastSeen: onlineHere ? wall : nil, events: local)
        return database.answer(request, unavailable: .json(200, nodeView)) { db in
            let stored = try StateRepository(db).events(of: device)
            let presence = try ClusterRepository(db).presence(of: [device])[device]
            let online = onlineHere || presence?.online == true
            return .json(200, Self.body(device, online: online, lastSeen: online ? wall : presence?.since,
                                        events: Self.newest(local + stored)))
        }
    }

    /// The newest event of each name.
    static func newest(_ events: [DeviceHub.KnownEvent]) -> [DeviceHub.KnownEvent] {
        var byName: [String: DeviceHub.KnownEvent] = [:]
        for event in events where byName[event.name].map({ $0.receivedAt < event.receivedAt }) ?? true {
            byName[event.name] = event
        }
        return byName.values.sorted { $0.name < $1.name }
    }

    /// The answer's body. A message that is not a JSON object (a robot may send anything) is
    /// left out rather than embedded.
    static func body(_ device: DeviceID, online: Bool, lastSeen: UnixTime?, events: [DeviceHub.KnownEvent]) -> JSONValue {
        var members: [(String, JSONValue)] = []
        for event in events {
            guard case .object? = try? JSONReader.parse(event.message) else { continue }
            members.append((event.name, .object([("message", .raw(String(decoding: event.message, as: UTF8.self))),
                                                 ("received_at", .string(event.receivedAt.iso8601))])))
        }
        return .object([("device_id", .string(device.rawValue)), ("online", .bool(online)),
                        ("last_seen", .optional(lastSeen?.iso8601)), ("events", .object(members))])
    }
}
