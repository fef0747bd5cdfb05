import Foundation
import Testing
import RelayCore
import RelayTestSupport
@testable import RelayStore

/// Membership, presence and handoffs against a real PostgreSQL.
@Suite struct ClusterRepositoryTests {
    let incarnationA = "00000000-0000-4000-8000-00000000000a"
    let incarnationB = "00000000-0000-4000-8000-00000000000b"

    @Test func presenceIsClusterWideAndGoesWithAnExpiredLease() throws {
        let database = try TestDatabase()
        defer { database.drop() }
        let db = try database.connect()
        let repo = ClusterRepository(db)
        try repo.register(node: "n1", incarnation: incarnationA, address: "h:1", leaseSeconds: 60)
        try repo.register(node: "n2", incarnation: incarnationB, address: "h:2", leaseSeconds: 2)
        let robot = DeviceID("r1")!, split = DeviceID("r2")!
        let since = UnixTime(seconds: 1_790_000_000)
        #expect(try repo.writePresence(node: "n1", [PresenceRow(deviceID: robot, robotSince: since, apps: 1),
                                                    PresenceRow(deviceID: split, robotSince: nil, apps: 1)]) == 1)
        try repo.writePresence(node: "n2", [PresenceRow(deviceID: split, robotSince: since, apps: 0)])
        var view = try repo.presence(of: [robot, split])
        #expect(view[robot] == ClusterPresence(deviceID: robot, online: true, since: since, apps: 1, nodes: ["n1"]))
        #expect(view[split]?.online == true && view[split]?.nodes == ["n1", "n2"])
        #expect(try repo.splitDevices() == 1)

        // n2 stops renewing: once its lease has run out its presence no longer counts and a purge removes it.
        Thread.sleep(forTimeInterval: 2.2)
        #expect(try repo.renew(node: "n1", incarnation: incarnationA, leaseSeconds: 60, sockets: 2, devices: 2, draining: false))
        view = try repo.presence(of: [split])
        #expect(view[split]?.online == false && view[split]?.nodes == ["n1"])
        #expect(try repo.purgeExpired() == ["n2"])
        #expect(try repo.nodes().map(\.nodeID) == ["n1"])
        // Its rows went with it, and it can write no more until it registers again.
        #expect(try presenceRows(db, node: "n2") == 0)
        #expect(throws: StoreError.self) { try repo.writePresence(node: "n2", [PresenceRow(deviceID: split, robotSince: nil, apps: 1)]) }
        #expect(try presenceRows(db, node: "n2") == 0)
        #expect(try repo.splitDevices() == 0)
        // Its robot counts as gone offline when the lease ended.
        #expect(try repo.presence(of: [split])[split]?.since != nil)
        // A node whose row was purged learns it on its next renewal.
        #expect(try !repo.renew(node: "n2", incarnation: incarnationB, leaseSeconds: 2, sockets: 0, devices: 0, draining: false))
    }

    @Test func emptyRowsAreDeletedAndTheRobotsOfflineTimeKept() throws {
        let database = try TestDatabase()
        defer { database.drop() }
        let db = try database.connect()
        let repo = ClusterRepository(db)
        try repo.register(node: "n1", incarnation: incarnationA, address: "h:1", leaseSeconds: 60)
        let device = DeviceID("d1")!
        try repo.writePresence(node: "n1", [PresenceRow(deviceID: device, robotSince: .now(), apps: 0)])
        let left = UnixTime(seconds: 1_790_000_123)
        #expect(try repo.writePresence(node: "n1", [PresenceRow(deviceID: device, robotSince: nil, apps: 0, robotLeftAt: left)]) == 2)
        #expect(try repo.presence(of: [device])[device] == ClusterPresence(deviceID: device, online: false, since: left, apps: 0, nodes: []))
        // A node's presence goes when it registers again (a new life) and when it leaves.
        let other = DeviceID("d2")!
        try repo.writePresence(node: "n1", [PresenceRow(deviceID: other, robotSince: nil, apps: 1)])
        try repo.register(node: "n1", incarnation: incarnationB, address: "h:1", leaseSeconds: 60)
        #expect(try presenceRows(db, node: "n1") == 0)
        try repo.writePresence(node: "n1", [PresenceRow(deviceID: other, robotSince: nil, apps: 1)])
        try repo.deregister(node: "n1", incarnation: incarnationB)
        #expect(try repo.nodes().isEmpty)
        #expect(try presenceRows(db, node: "n1") == 0)
    }

    private func presenceRows(_ db: PGConnection, node: String) throws -> Int {
        Int(try db.execute("SELECT count(*) FROM device_presence WHERE node_id = \(node)").rows.first?[0] ?? "") ?? -1
    }

    @Test func handoffsAreTakenOnceByTheirNode() throws {
        let database = try TestDatabase()
        defer { database.drop() }
        let repo = ClusterRepository(try database.connect())
        let event = Array(#"{"type":"event","event":"mode_changed","data":{"mode":"a \"quoted\" word"}}"#.utf8)
        let handoff = DeviceHandoff(deviceID: DeviceID("d1")!, toNode: "n2", statusSince: UnixTime(seconds: 1_790_000_000),
                                    robotOnline: true, replay: [event])
        try repo.handOff([handoff])
        #expect(try repo.takeHandoffs(node: "n1").isEmpty)
        #expect(try repo.takeHandoffs(node: "n2") == [handoff])
        #expect(try repo.takeHandoffs(node: "n2").isEmpty)
    }
}
