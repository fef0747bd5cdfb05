import Foundation
import Testing
@testable import WimzRelayClient

// Timing-bound async tests: in WimzRelayClientTests, whose run has the cooperative thread pool
// to itself (the daemon's blocking socket tests starve it, scripts/test.sh).

/// Network path updates as a phone delivers them: in bursts, mostly attribute changes.
@Suite struct PathChangeWatchTests {
    private func watch() -> (PathChangeWatch, Locked<Int>) {
        let count = Locked(0)
        return (PathChangeWatch(settle: .milliseconds(50)) { count.withLock { $0 += 1 } }, count)
    }

    private let wifi = NetworkPathSnapshot(usable: true, interface: "en0")
    private let cellular = NetworkPathSnapshot(usable: true, interface: "pdp_ip0")
    private let none = NetworkPathSnapshot(usable: false, interface: nil)

    @Test func theFirstPathIsTheCurrentOneAndAttributeChangesAreNoChange() async throws {
        let (paths, reconnects) = watch()
        paths.update(wifi)
        try await Task.sleep(for: .milliseconds(400))
        paths.update(wifi)  // expensive/constrained/DNS changed: the same interface, still usable
        try await Task.sleep(for: .milliseconds(400))
        #expect(reconnects.withLock { $0 } == 0)
    }

    @Test func anotherInterfaceOrAPathBackReconnectsOnceABurstHasSettled() async throws {
        let (paths, reconnects) = watch()
        paths.update(wifi)
        try await Task.sleep(for: .milliseconds(400))
        for path in [none, cellular, cellular, cellular] { paths.update(path) }  // Wi-Fi → cellular, in a burst
        try await Task.sleep(for: .milliseconds(400))
        #expect(reconnects.withLock { $0 } == 1)
        paths.update(none)
        try await Task.sleep(for: .milliseconds(400))
        #expect(reconnects.withLock { $0 } == 1, "losing the path is no reason to reconnect (nothing to reconnect over)")
        paths.update(cellular)
        try await Task.sleep(for: .milliseconds(400))
        #expect(reconnects.withLock { $0 } == 2, "the path came back")
        paths.update(wifi)
        paths.update(cellular)  // back before it settled: nothing changed
        try await Task.sleep(for: .milliseconds(400))
        #expect(reconnects.withLock { $0 } == 2)
    }
}
