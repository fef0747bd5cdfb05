import Foundation
import Testing
import RelayCore
import RelayTestSupport
import RelayStore
import RelayCrypto
@testable import RelayWorkers

final class EventLog: @unchecked Sendable {
    private let lock = NSLock()
    private var events: [StoreEvent] = []
    func append(_ e: StoreEvent) { lock.lock(); events.append(e); lock.unlock() }
    var all: [StoreEvent] { lock.lock(); defer { lock.unlock() }; return events }

    /// Waits until `match` finds something in the log.
    func wait<T>(timeout: Double = 10, _ match: (StoreEvent) -> T?) -> T? {
        let deadline = Date().addingTimeInterval(timeout)
        while Date() < deadline {
            if let hit = all.lazy.compactMap(match).first { return hit }
            usleep(20_000)
        }
        return nil
    }
}

@Suite struct StoreMonitorTests {
    /// The queue to the monitor holds at most its capacity of digests: a digest already queued is
    /// still taken (it costs nothing), a new one past the bound is not.
    /// Waking the monitor costs the same on the two-hundredth lookup as on the first. Its wake-up
    /// closure used to be read as `withLock { $0 }`, which wrapped it in two reabstraction thunks
    /// and stored the wrapped one back: every call went two frames deeper (a cold storm's service
    /// thread spent 75 % of its time in them). Here the wake-up counts the frames below it when it
    /// runs: the same number every time. (Frames, not a local's address: AddressSanitizer puts
    /// locals on a stack of its own.)
    @Test func wakingTheMonitorDoesNotGrowWithLookups() {
        let queue = CredentialQueue(capacity: 10_000)
        let depths = Locked<[Int]>([])
        queue.whenQueued {
            let depth = Thread.callStackReturnAddresses.count
            depths.withLock { $0.append(depth) }
        }
        for n in 0..<200 {
            #expect(queue.lookUp(BearerToken.digest("wimz_a_\(n)")))
            _ = queue.take()  // each lookup the first of its batch: each wakes the monitor
        }
        let seen = depths.current
        #expect(seen.count == 200 && Set(seen.dropFirst()).count == 1, "stack depths \(Set(seen).sorted())")
    }

    /// A storm's lookups wake the monitor once a batch, not once each (a write to its pipe, on the
    /// service thread): the monitor takes all that is queued when it runs.
    @Test func onlyTheFirstLookupOfABatchWakesTheMonitor() {
        let queue = CredentialQueue()
        let devices = FollowedDevices()
        let wakes = Locked(0)
        queue.whenQueued { wakes.withLock { $0 += 1 } }
        devices.whenQueued { wakes.withLock { $0 += 1 } }
        for n in 0..<50 { #expect(queue.lookUp(BearerToken.digest("wimz_a_\(n)"))) }
        for n in 0..<50 { devices.follow(DeviceID("d\(n)")!) }
        #expect(wakes.current == 2)
        #expect(queue.take().digests.count == 50 && devices.take().count == 50)
        #expect(queue.lookUp(BearerToken.digest("wimz_a_again")))
        devices.follow(DeviceID("d0")!)
        #expect(wakes.current == 4)
    }

    @Test func theLookupQueueIsBounded() {
        let queue = CredentialQueue(capacity: 2)
        let (a, b, c) = (BearerToken.digest("wimz_a_1"), BearerToken.digest("wimz_a_2"), BearerToken.digest("wimz_a_3"))
        #expect(queue.lookUp(a) && queue.lookUp(b))
        #expect(!queue.lookUp(c))
        #expect(queue.lookUp(a))
        #expect(Set(queue.take().digests) == [a, b])
        #expect(queue.lookUp(c))
    }

    @Test func reportsReadinessLookupsAndChangesFromOtherConnections() throws {
        let database = try TestDatabase()
        defer { database.drop() }
        let db = try database.connect()
        try DeviceRepository(db).add(DeviceID("d1")!, name: "", actor: "t")
        let first = try TokenRepository(db).issue(device: DeviceID("d1")!, role: .robot, label: "", expiresIn: nil, actor: "t")

        let log = EventLog()
        let queue = CredentialQueue()
        let monitor = StoreMonitor(conninfo: database.url, migrator: try TestEnvironment.migrator(), turnRealm: "wimz",
                                   credentials: queue) { log.append($0) }
        monitor.start()
        defer { monitor.stop() }

        let ready = log.wait { if case .health(let h) = $0, h.state == .ready { return h } else { return nil } }
        #expect(ready != nil)
        #expect(log.wait { if case .credentialsMayBeStale = $0 { return true } else { return nil } } == true)
        // Presented tokens are read (in one batch or two, as the monitor takes them): the one that
        // exists is found, the made-up one is not.
        let madeUp = BearerToken.digest("wimz_r_made_up")
        #expect(queue.lookUp(first.record.digest) && queue.lookUp(madeUp))
        let found = log.wait { _ -> (digests: Set<[UInt8]>, ids: [Int64])? in
            let batches = log.all.compactMap { event -> ([[UInt8]], [CredentialEntry])? in
                if case .credentialsFound(let digests, let entries) = event { return (digests, entries) } else { return nil }
            }
            let digests = Set(batches.flatMap(\.0))
            return digests.count == 2 ? (digests, batches.flatMap(\.1).map(\.token.id)) : nil
        }
        #expect(found?.digests == [first.record.digest, madeUp])
        #expect(found?.ids == [first.record.id])
        queue.recheck(ids: [first.record.id, 999_999])
        let rechecked = log.wait { if case .credentialsRechecked(let ids, let entries) = $0 { return (ids, entries) } else { return nil } }
        #expect(rechecked?.0 == [first.record.id, 999_999] && rechecked?.1.map(\.token.id) == [first.record.id])

        // A revocation made by another connection (the CLI) arrives as a notification.
        try TokenRepository(db).revoke(id: first.record.id, actor: "t")
        let changed = log.wait { event -> CredentialEntry? in
            if case .tokenChanged(let id, let entry?) = event, id == first.record.id, entry.token.revokedAt != nil { return entry }
            return nil
        }
        #expect(changed != nil)

        try DeviceRepository(db).setDisabled(DeviceID("d1")!, true, actor: "t")
        let disabled = log.wait { event -> Bool? in
            if case .deviceChanged(let id, let disabled) = event, id.rawValue == "d1" { return disabled }
            return nil
        }
        #expect(disabled == true)
    }

    /// A node reads the registrations of the devices it follows, in one batch, and later changes of
    /// those devices only: a change of a device it does not follow is not read (notifications
    /// arrive in commit order, so one read for it would come before the followed device's).
    @Test func readsAndFollowsOnlyTheDevicesItIsAskedFor() throws {
        let database = try TestDatabase()
        defer { database.drop() }
        let db = try database.connect()
        let (followed, other) = (DeviceID("followed")!, DeviceID("other")!)
        var apps: [DeviceID: Int64] = [:]
        for device in [followed, other] {
            try DeviceRepository(db).add(device, name: "Rex's \(device.rawValue)", actor: "t")
            apps[device] = try TokenRepository(db).issue(device: device, role: .app, label: "", expiresIn: nil, actor: "t").record.id
        }
        func register(_ device: DeviceID, _ n: Int) throws {
            let token = String(repeating: "\(n)", count: 64)
            _ = try PushRepository(db).save(PushRegistration(token: token, environment: .sandbox, device: device,
                                                             appTokenID: apps[device]!, kinds: [.barkDetected]), address: nil)
        }
        try register(followed, 1)
        _ = try LiveActivityRepository(db).save(LiveActivityRegistration(device: followed, appTokenID: apps[followed]!, kind: .startToken,
                                                                         token: String(repeating: "a", count: 64),
                                                                         environment: .production), address: nil)

        let log = EventLog()
        let devices = FollowedDevices()
        let monitor = StoreMonitor(conninfo: database.url, migrator: try TestEnvironment.migrator(), turnRealm: "wimz",
                                   credentials: CredentialQueue(), devices: devices) { log.append($0) }
        monitor.start()
        defer { monitor.stop() }
        #expect(log.wait { if case .credentialsMayBeStale = $0 { return true } else { return nil } } == true)
        devices.follow(followed)
        let read = log.wait { if case .devicesRead(let read) = $0 { return read } else { return nil } }
        #expect(read?.map(\.device) == [followed])
        #expect(read?.first?.push.map(\.token) == [String(repeating: "1", count: 64)])
        #expect(read?.first?.liveActivities.map(\.kind) == [.startToken])
        #expect(read?.first?.name == "Rex's followed" && read?.first?.run == nil)

        try register(other, 2)
        try register(followed, 3)
        let changed = log.wait { event -> [DeviceID]? in
            let changes = log.all.compactMap { if case .pushChanged(let device, _) = $0 { return device } else { return nil } }
            return changes.contains(followed) ? changes : nil
        }
        #expect(changed == [followed])
        if case .pushChanged(_, let now)? = log.all.last(where: { if case .pushChanged = $0 { return true } else { return false } }) {
            #expect(now.count == 2)
        }
        // Unfollowed, its changes are not read either.
        devices.unfollow(followed)
        try register(followed, 4)
        devices.follow(other)
        #expect(log.wait { if case .devicesRead(let read) = $0, read.first?.device == other { return read.first?.push.count } else { return nil } } == 1)
        try register(other, 5)
        #expect(log.wait { if case .pushChanged(other, let now) = $0 { return now.count } else { return nil } } == 2)
        #expect(log.all.filter { if case .pushChanged(followed, _) = $0 { return true } else { return false } }.count == 1)
    }

    /// While lookups keep coming (a restarted node taking its clients back), a device that arrived
    /// is read once they pause for `DeviceReadSchedule.quiet`, or after `latest` at the most —
    /// and it is read: lookups every 10 ms here never pause that long. Every lookup counts as a
    /// storm here (`stormLookups: 1`), so how fast this machine looks up changes nothing; the
    /// times checked are lower bounds, which a loaded machine only makes longer.
    @Test func arrivedDevicesWaitForLookupsToPauseButAreRead() throws {
        let database = try TestDatabase()
        defer { database.drop() }
        let device = DeviceID("arrived")!
        try DeviceRepository(try database.connect()).add(device, name: "Rex", actor: "t")
        let log = Locked<[(event: StoreEvent, at: UInt64)]>([])
        let lookups = CredentialQueue(), devices = FollowedDevices()
        let monitor = StoreMonitor(conninfo: database.url, migrator: try TestEnvironment.migrator(), turnRealm: "wimz",
                                   credentials: lookups, devices: devices, deviceReads: DeviceReadSchedule(stormLookups: 1)) { event in
            log.withLock { $0.append((event, MonotonicClock.nanoseconds())) }
        }
        monitor.start()
        defer { monitor.stop() }
        func answered() -> [UInt64] {
            log.current.compactMap { if case .credentialsFound = $0.event { return $0.at } else { return nil } }
        }
        func readAt() -> UInt64? {
            log.current.first { if case .devicesRead = $0.event { return true } else { return false } }?.at
        }
        var n = 0
        func lookUpAnother() {
            n += 1
            _ = lookups.lookUp(BearerToken.digest("wimz_a_unknown\(n)"))
            usleep(10_000)
        }
        while answered().isEmpty, n < 3_000 { lookUpAnother() }
        let followedAt = MonotonicClock.nanoseconds()
        devices.follow(device)
        while readAt() == nil, n < 6_000 { lookUpAnother() }

        let read = try #require(readAt(), "the device was never read while lookups kept coming")
        let lastLookup = try #require(answered().last { $0 < read })
        #expect(read - lastLookup >= DeviceReadSchedule.quiet || read - followedAt >= DeviceReadSchedule.latest,
                "read \((read - lastLookup) / 1_000_000) ms after a lookup, \((read - followedAt) / 1_000_000) ms after arriving")
    }

    /// The schema is read at most once a second, however many notifications wake the monitor
    /// (it was read on every wake: two transactions a node for every token or push change).
    @Test func notificationsDoNotEachReadTheSchema() throws {
        let database = try TestDatabase()
        defer { database.drop() }
        let log = EventLog()
        let monitor = StoreMonitor(conninfo: database.url, migrator: try TestEnvironment.migrator(), turnRealm: "wimz",
                                   credentials: CredentialQueue()) { log.append($0) }
        monitor.start()
        defer { monitor.stop() }
        #expect(log.wait { if case .credentialsMayBeStale = $0 { return true } else { return nil } } == true)
        let db = try database.connect()
        let before = monitor.statusChecks
        let started = Date()
        for i in 0..<30 {
            _ = try db.execute("SELECT pg_notify(\(StoreNotification.credentialsChannel), \("test:\(i)"))")  // each its own wake
            usleep(5_000)
        }
        usleep(100_000)
        let seconds = Int(Date().timeIntervalSince(started).rounded(.up))
        #expect(monitor.statusChecks - before <= seconds, "\(monitor.statusChecks - before) schema reads in \(seconds) s")
    }

    @Test func reportsPendingMigrationsAndUnreachableDatabase() throws {
        let database = try TestDatabase(migrated: false)
        defer { database.drop() }
        let log = EventLog()
        let monitor = StoreMonitor(conninfo: database.url, migrator: try TestEnvironment.migrator(), turnRealm: "wimz",
                                   credentials: CredentialQueue()) { log.append($0) }
        monitor.start()
        let outdated = log.wait { if case .health(let h) = $0, h.state == .schemaOutdated { return h } else { return nil } }
        #expect(outdated?.reason.contains("pending migrations") == true)
        try TestEnvironment.migrator().migrate(try database.connect())
        #expect(log.wait { if case .health(let h) = $0, h.state == .ready { return h } else { return nil } } != nil)
        monitor.stop()

        let downLog = EventLog()
        let down = StoreMonitor(conninfo: "host=/nonexistent-wimz port=5432 user=postgres dbname=x",
                                migrator: try TestEnvironment.migrator(), turnRealm: "wimz",
                                credentials: CredentialQueue()) { downLog.append($0) }
        down.start()
        defer { down.stop() }
        #expect(downLog.wait { if case .health(let h) = $0, h.state == .unavailable { return h } else { return nil } } != nil)
    }
}
