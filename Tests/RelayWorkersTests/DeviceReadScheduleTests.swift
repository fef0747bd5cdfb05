import Testing
@testable import RelayWorkers

/// The store monitor's order of work: lookups hold handshakes, so during a storm of lookups
/// arrived devices wait — within a bound — while a node taking a client or two reads at once.
@Suite struct DeviceReadScheduleTests {
    private let ms: UInt64 = 1_000_000
    private let start: UInt64 = 5_000_000_000

    @Test func nothingQueuedIsNeverDue() {
        var schedule = DeviceReadSchedule()
        #expect(!schedule.isDue(oldestQueuedAt: nil, now: start))
        #expect(schedule.millisecondsUntilDue(oldestQueuedAt: nil, now: start) == nil)
        schedule.lookedUp(1_000, at: start)
        #expect(!schedule.isDue(oldestQueuedAt: nil, now: start + 1))
    }

    /// Without lookups, or with a few (a client or two arriving), a device is read at once: its
    /// first push is not held back.
    @Test func outsideAStormADeviceIsReadAtOnce() {
        var schedule = DeviceReadSchedule(stormLookups: 64)
        #expect(schedule.isDue(oldestQueuedAt: start, now: start))
        for n in 0..<63 { schedule.lookedUp(1, at: start + UInt64(n) * ms) }
        #expect(schedule.millisecondsUntilDue(oldestQueuedAt: start, now: start + 63 * ms) == 0)
    }

    /// In a storm (`stormLookups` within `quiet`), devices wait for the lookups to pause.
    @Test func inAStormDevicesWaitForLookupsToPause() {
        var schedule = DeviceReadSchedule(stormLookups: 64)
        schedule.lookedUp(64, at: start)
        let quiet = DeviceReadSchedule.quiet
        #expect(!schedule.isDue(oldestQueuedAt: start, now: start + 1))
        #expect(schedule.millisecondsUntilDue(oldestQueuedAt: start, now: start + 1) == Int32(quiet / ms))
        #expect(schedule.millisecondsUntilDue(oldestQueuedAt: start, now: start + quiet - 1) == 1)
        #expect(schedule.isDue(oldestQueuedAt: start, now: start + quiet))
    }

    /// Lookups that never pause hold a device back for `latest` at most, counted from the first
    /// device queued.
    @Test func lookupsThatKeepComingHoldDevicesBackForLatestAtMost() {
        var schedule = DeviceReadSchedule(stormLookups: 64)
        let step = DeviceReadSchedule.quiet / 2
        var now = start
        var readAt: UInt64?
        while now <= start + 2 * DeviceReadSchedule.latest {
            schedule.lookedUp(64, at: now)
            now += step
            if readAt == nil, schedule.isDue(oldestQueuedAt: start, now: now) { readAt = now }
        }
        let latest = start + DeviceReadSchedule.latest
        #expect(readAt.map { $0 >= latest && $0 < latest + step } == true, "read at \(String(describing: readAt))")
        #expect(schedule.millisecondsUntilDue(oldestQueuedAt: now, now: now) == Int32((DeviceReadSchedule.quiet - step) / ms))
    }

    /// A storm is counted over the last `quiet` or so: lookups spread thinner than that are none.
    @Test func aStormIsCountedOverTheLastQuietOnly() {
        var schedule = DeviceReadSchedule(stormLookups: 64)
        let quiet = DeviceReadSchedule.quiet
        schedule.lookedUp(40, at: start)
        schedule.lookedUp(40, at: start + quiet / 2)
        #expect(!schedule.isDue(oldestQueuedAt: start, now: start + quiet / 2 + 1))  // 80 within quiet
        schedule.lookedUp(40, at: start + 3 * quiet)
        #expect(schedule.isDue(oldestQueuedAt: start + 3 * quiet, now: start + 3 * quiet + 1))  // 40 lately
    }
}
