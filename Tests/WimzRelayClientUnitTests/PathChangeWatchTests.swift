import Foundation
import Testing
@testable import WimzRelayClient

/// Network path updates as a phone delivers them: in bursts, mostly attribute changes. On a clock
/// moved by hand: a path settles when the test says so, however busy the machine is.
@Suite struct PathChangeWatchTests {
    private let wifi = NetworkPathSnapshot(usable: true, interface: "en0")
    private let cellular = NetworkPathSnapshot(usable: true, interface: "pdp_ip0")
    private let none = NetworkPathSnapshot(usable: false, interface: nil)
    private static let settle = Duration.milliseconds(500)

    private func watch() -> (PathChangeWatch, ManualClock, Locked<Int>) {
        let count = Locked(0), clock = ManualClock()
        let paths = PathChangeWatch(settle: Self.settle, clock: clock.relayClientClock) { count.withLock { $0 += 1 } }
        return (paths, clock, count)
    }

    /// `updates` arrive in one burst; the last one settles and is judged. Returns the reconnects so far.
    private func burst(_ paths: PathChangeWatch, _ clock: ManualClock, _ reconnects: Locked<Int>,
                       _ updates: [NetworkPathSnapshot]) async throws -> Int {
        let judged = updates.map { paths.update($0) }.last!
        try await until { clock.deadlines.count == 1 }  // the burst's earlier updates gave way at once
        clock.advance(by: Self.settle)
        await judged.value
        return reconnects.withLock { $0 }
    }

    @Test func theFirstPathIsTheCurrentOneAndAttributeChangesAreNoChange() async throws {
        let (paths, clock, reconnects) = watch()
        #expect(try await burst(paths, clock, reconnects, [wifi]) == 0)
        // expensive/constrained/DNS changed: the same interface, still usable
        #expect(try await burst(paths, clock, reconnects, [wifi]) == 0)
    }

    @Test func anotherInterfaceOrAPathBackReconnectsOnceABurstHasSettled() async throws {
        let (paths, clock, reconnects) = watch()
        #expect(try await burst(paths, clock, reconnects, [wifi]) == 0)
        #expect(try await burst(paths, clock, reconnects, [none, cellular, cellular, cellular]) == 1, "Wi-Fi → cellular, in a burst")
        #expect(try await burst(paths, clock, reconnects, [none]) == 1, "losing the path is no reason to reconnect (nothing to reconnect over)")
        #expect(try await burst(paths, clock, reconnects, [cellular]) == 2, "the path came back")
        #expect(try await burst(paths, clock, reconnects, [wifi, cellular]) == 2, "back before it settled: nothing changed")
    }

    @Test func anUpdateThatASecondOneReplacesIsNeverJudged() async throws {
        let (paths, clock, reconnects) = watch()
        #expect(try await burst(paths, clock, reconnects, [wifi]) == 0)
        let replaced = paths.update(cellular)
        let last = paths.update(wifi)
        await replaced.value  // ended at once: no clock moved
        try await until { clock.deadlines.count == 1 }
        clock.advance(by: Self.settle)
        await last.value
        #expect(reconnects.withLock { $0 } == 0 && clock.fired == 2)
    }
}
