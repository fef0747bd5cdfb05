import Testing
@testable import RelayCore

@Suite struct ClusterBookTests {
    let second: UInt64 = 1_000_000_000
    let device = DeviceID("d1")!

    @Test func arrivalsAreClaimedOnceAndPresenceIsBatched() {
        var book = ClusterBook(dampingWindow: 5 * second)
        book.deviceArrived(device, now: 10 * second)
        book.changed(device)
        book.changed(device)
        let batch = book.takeBatch(now: 10 * second) { _ in (UnixTime(seconds: 1), 2) }
        #expect(batch.claims == [device])
        #expect(batch.rows == [PresenceRow(deviceID: device, robotSince: UnixTime(seconds: 1), apps: 2)])
        #expect(!book.hasWork)
    }

    @Test func aDeviceThatCameBackSoonAfterMovingAwayIsClaimedWhenTheWindowEnds() {
        var book = ClusterBook(dampingWindow: 5 * second)
        book.yieldedDevice(device, now: 10 * second)
        book.deviceArrived(device, now: 12 * second)
        #expect(book.takeBatch(now: 12 * second) { _ in (nil, 1) }.claims.isEmpty)
        #expect(book.takeBatch(now: 14 * second) { _ in (nil, 1) }.claims.isEmpty)
        #expect(book.takeBatch(now: 15 * second) { _ in (nil, 1) }.claims == [device])
        // Outside the window a return is claimed at once.
        book.yieldedDevice(device, now: 20 * second)
        book.deviceArrived(device, now: 26 * second)
        #expect(book.takeBatch(now: 26 * second) { _ in (nil, 1) }.claims == [device])
    }

    @Test func aDeferredClaimIsDroppedWhenTheDeviceLeftMeanwhile() {
        var book = ClusterBook(dampingWindow: 5 * second)
        book.yieldedDevice(device, now: 10 * second)
        book.deviceArrived(device, now: 11 * second)
        #expect(book.takeBatch(now: 16 * second) { _ in (nil, 0) }.claims.isEmpty)
        #expect(book.deferredCount == 0)
    }

    @Test func theRobotsOfflineTimeSurvivesLaterChangesInTheSameBatch() {
        var book = ClusterBook(dampingWindow: 0)
        book.changed(device, robotLeftAt: UnixTime(seconds: 7))
        book.changed(device)
        #expect(book.takeBatch(now: 0) { _ in (nil, 1) }.rows.first?.robotLeftAt == UnixTime(seconds: 7))
    }
}

@Suite struct DeviceHubHandoffTests {
    @Test func aMovedRobotKeepsItsOnlineTimeAndTheAppsTheirReplay() {
        var limits = DeviceHub.Limits()
        limits.replayEvents = ["mode_changed"]
        let hub = DeviceHub(limits: limits, clock: ManualClock(wall: UnixTime(seconds: 100)).clock)
        let device = DeviceID("d1")!
        let event = Array(#"{"type":"event","event":"mode_changed","data":{"mode":"x"}}"#.utf8)
        hub.adoptHandoff(device, since: UnixTime(seconds: 50), robotOnline: true, replay: [event], now: 0,
                         wallClock: UnixTime(seconds: 200))
        let robot = Session(id: 1, role: .robot, deviceID: device, tokenID: 1, tokenExpiresAt: nil, remoteAddress: "x",
                            connectedAt: .now(), now: 0, queue: SendQueue(maxMessages: 10, maxBytes: 1 << 16))
        hub.attach(robot, now: 1, wallClock: UnixTime(seconds: 201))
        #expect(hub.status(of: device).since == UnixTime(seconds: 50))
        #expect(hub.handoffState(of: device, now: 0)?.replay == [event])
    }
}
