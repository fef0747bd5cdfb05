import Testing
@testable import RelayWorkers

/// The store monitor's order of work: lookups hold handshakes, so arrived devices wait while
/// lookups keep coming — within a bound.
@Suite struct DeviceReadScheduleTests {
    private let ms: UInt64 = 1_000_000
    private let start: UInt64 = 5_000_000_000

    @Test func nothingQueuedIsNeverDue() {
        var schedule = DeviceReadSchedule()
        #expect(!schedule.isDue(oldestQueuedAt: nil, now: start))
        #expect(schedule.millisecondsUntilDue(oldestQueuedAt: nil, now: start) == nil)
        schedule.lookedUp(at: start)
        #expect(!schedule.isDue(oldestQueuedAt: nil, now: start + 10_000 * ms))
    }

    /// On a node where no token is being read, an arriving device is read at once.
    @Test func withoutLookupsADeviceIsReadAtOnce() {
        let schedule = DeviceReadSchedule()
        #expect(schedule.isDue(oldestQueuedAt: start, now: start))
        #expect(schedule.millisecondsUntilDue(oldestQueuedAt: start, now: start) == 0)
    }

    /// After a lookup, devices wait for the lookups to pause for `quiet`.
    @Test func devicesWaitForLookupsToPause() {
        var schedule = DeviceReadSchedule()
        schedule.lookedUp(at: start)
        let quiet = DeviceReadSchedule.quiet
        #expect(!schedule.isDue(oldestQueuedAt: start, now: start + 1))
        #expect(schedule.millisecondsUntilDue(oldestQueuedAt: start, now: start + 1) == Int32(quiet / ms))
        #expect(!schedule.isDue(oldestQueuedAt: start, now: start + quiet - 1))
        #expect(schedule.millisecondsUntilDue(oldestQueuedAt: start, now: start + quiet - 1) == 1)
        #expect(schedule.isDue(oldestQueuedAt: start, now: start + quiet))
    }

    /// Lookups that never pause hold a device back for `latest` at most, counted from the first
    /// device queued.
    @Test func lookupsThatKeepComingHoldDevicesBackForLatestAtMost() {
        var schedule = DeviceReadSchedule()
        let step = DeviceReadSchedule.quiet / 2
        var now = start
        var readAt: UInt64?
        while now <= start + 2 * DeviceReadSchedule.latest {
            schedule.lookedUp(at: now)
            now += step
            if readAt == nil, schedule.isDue(oldestQueuedAt: start, now: now) { readAt = now }
        }
        let latest = start + DeviceReadSchedule.latest
        #expect(readAt.map { $0 >= latest && $0 < latest + step } == true, "read at \(String(describing: readAt))")
        #expect(schedule.millisecondsUntilDue(oldestQueuedAt: now, now: now)
                == Int32(DeviceReadSchedule.quiet / ms) - Int32(step / ms))
    }
}
