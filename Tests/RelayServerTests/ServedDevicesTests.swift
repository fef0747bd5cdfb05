import Testing
import RelayCore
@testable import RelayWorkers
@testable import RelayServer

/// Which devices a node holds registrations for: those it serves and the most recent that left,
/// read once when they arrive, forgotten when pushed out.
@Suite struct ServedDevicesTests {
    @Test func aNodeFollowsWhatItServesAndTheMostRecentThatLeft() {
        let relay = InProcessRelay()
        let followed = FollowedDevices()
        let served = ServedDevices(followed: followed, push: relay.components.push, missionRuns: relay.components.missionRuns,
                                   recentCapacity: 2)
        let (a, b, c) = (DeviceID("a")!, DeviceID("b")!, DeviceID("c")!)
        for device in [a, b, c] { served.arrived(device) }
        #expect(Set(followed.take()) == [a, b, c] && followed.count == 3)
        served.left(a)
        served.left(b)
        #expect(followed.count == 3)  // both held among the recent
        served.left(c)
        #expect(followed.count == 2)  // a, the least recent, forgotten
        served.arrived(b)
        #expect(followed.take().isEmpty)  // held: nothing to read
        served.arrived(a)
        #expect(followed.take() == [a])  // forgotten: read again
        #expect(followed.count == 3)
    }

    /// A device that comes and goes all day leaves a bounded list behind.
    @Test func departuresStayBounded() {
        let relay = InProcessRelay()
        let served = ServedDevices(followed: FollowedDevices(), push: relay.components.push, missionRuns: relay.components.missionRuns)
        let phone = DeviceID("phone")!
        served.arrived(phone)
        for _ in 0..<10_000 {
            served.left(phone)
            served.arrived(phone)
        }
        #expect(served.departuresListed <= 2 * 1024 + 1)
    }
}

extension ServedDevices {
    /// Departures still listed, stale ones included.
    var departuresListed: Int { departures.count - oldest }
}
