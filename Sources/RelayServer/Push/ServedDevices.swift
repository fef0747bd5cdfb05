import RelayCore
import RelayWorkers

/// Which devices' push registrations, Live Activity tokens and mission runs this node holds: those
/// with a socket here, and the `recentCapacity` whose last socket left most recently (a robot that
/// blips or a phone that reconnects finds them held). Nothing fleet-sized is read or held: a
/// process holds what its own clients need, like their tokens.
///
/// A device that arrives and is not held is followed: the store monitor reads it in its next
/// batch (`FollowedDevices`; one transaction for the devices of a whole storm), and until then
/// its push-worthy events and mission signals wait in `PushCoordinator` and `MissionRuns`, so
/// none is lost to the read. While followed, the store's notifications keep it current; one
/// pushed out of the recent is forgotten. `robot_offline` and the end of a dead node's run read
/// the claimed devices' registrations in their own jobs. Service thread.
final class ServedDevices {
    /// Devices kept after their last socket left (each a few hundred bytes).
    static let recentCapacity = 10_000

    private let followed: FollowedDevices
    private let push: PushCoordinator
    private let missionRuns: MissionRuns
    /// Every device followed: those with a socket here and those in `recent`.
    private var held: Set<DeviceID> = []
    /// Followed devices without a socket here, least recently left first out.
    private var recent: LRUTable<DeviceID, DeviceID>

    init(followed: FollowedDevices, push: PushCoordinator, missionRuns: MissionRuns, recentCapacity: Int = ServedDevices.recentCapacity) {
        self.followed = followed
        self.push = push
        self.missionRuns = missionRuns
        recent = LRUTable(capacity: recentCapacity)
    }

    /// The first socket of `device` attached here.
    func arrived(_ device: DeviceID) {
        recent.remove(device)
        guard held.insert(device).inserted else { return }
        followed.follow(device)
        push.follow(device)
        missionRuns.follow(device)
    }

    /// The last socket of `device` here detached: held among the recent, the least recent out.
    func left(_ device: DeviceID) {
        guard held.contains(device) else { return }
        if recent.count == recent.capacity, recent.peek(device) == nil, let oldest = recent.oldestValue {
            recent.remove(oldest)
            forget(oldest)
        }
        recent.set(device, device)
    }

    /// What the store holds for followed devices (`StoreEvent.devicesRead`).
    func read(_ devices: [DeviceRegistrations]) {
        for stored in devices where held.contains(stored.device) {
            push.changed(stored.device, stored.push)
            missionRuns.read(stored)
        }
    }

    private func forget(_ device: DeviceID) {
        held.remove(device)
        followed.unfollow(device)
        push.forget(device)
        missionRuns.forget(device)
    }
}

extension ServedDevices: MetricsReporting {
    func report(to metrics: MetricsSink) {
        metrics.gauge("wimz_devices_followed",
                      "Devices whose push registrations and Live Activity tokens this node holds (served now or lately).", held.count)
    }
}
