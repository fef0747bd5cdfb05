import RelayCore
import RelayWorkers

/// Which devices' push registrations, Live Activity tokens and mission runs this node holds: those
/// with a socket here, and the `recentCapacity` whose last socket left most recently (a robot that
/// blips or a phone that reconnects finds them held). Nothing fleet-sized is read or held: a
/// process holds what its own clients need, like their tokens.
///
/// A device that arrives and is not held is followed: the store monitor reads it
/// (`FollowedDevices`) at once, or during a storm of token lookups once they pause, 2 s at the
/// most (`DeviceReadSchedule`: lookups hold handshakes); until then
/// its push-worthy events and mission signals wait in `PushCoordinator` and `MissionRuns`, so
/// none is lost to the read. While followed, the store's notifications keep it current; one
/// pushed out of the recent is forgotten. `robot_offline` and the end of a dead node's run read
/// the claimed devices' registrations in their own jobs. Service thread.
///
/// Every handshake passes here twice (arrival, departure): plain dictionaries and an array, no
/// generic type of another module (unspecialised, `LRUTable` cost a warm handshake 5 %).
final class ServedDevices {
    /// Devices kept after their last socket left (each a few hundred bytes).
    static let recentCapacity = 10_000

    private let followed: FollowedDevices
    private let push: PushCoordinator
    private let missionRuns: MissionRuns
    /// Told which followed devices are sealed (v1.5), and to forget one no longer followed.
    private let hub: DeviceHub?
    /// Told the settings' versions of followed devices (v1.6), and to forget one no longer followed.
    private let settings: RobotSettings?
    private let recentCapacity: Int
    /// Followed devices without a socket here, each with the number of its departure.
    private var recent: [DeviceID: UInt64] = [:]
    /// Departures in order, from `oldest` on; an entry whose number `recent` no longer holds is
    /// stale (the device came back, or left again later).
    /// Internal, not private: the tests check the list stays bounded.
    private(set) var departures: [(device: DeviceID, number: UInt64)] = []
    private(set) var oldest = 0
    private var departed: UInt64 = 0
    /// Devices with a socket here (all followed).
    private var present = 0

    init(followed: FollowedDevices, push: PushCoordinator, missionRuns: MissionRuns, hub: DeviceHub? = nil,
         settings: RobotSettings? = nil, recentCapacity: Int = ServedDevices.recentCapacity) {
        self.settings = settings
        self.followed = followed
        self.push = push
        self.missionRuns = missionRuns
        self.hub = hub
        self.recentCapacity = recentCapacity
    }

    /// The first socket of `device` attached here: held already if it left lately, else followed.
    func arrived(_ device: DeviceID) {
        present += 1
        guard recent.removeValue(forKey: device) == nil else { return }
        followed.follow(device)
        push.follow(device)
        missionRuns.follow(device)
    }

    /// The last socket of `device` here detached: held among the recent, the least recent out.
    func left(_ device: DeviceID) {
        present -= 1
        departed += 1
        recent[device] = departed
        departures.append((device, departed))
        while recent.count > recentCapacity, oldest < departures.count {
            let (candidate, number) = departures[oldest]
            oldest += 1
            guard recent[candidate] == number else { continue }  // stale
            recent[candidate] = nil
            forget(candidate)
        }
        // Stale entries go once they are most of the list: it stays within twice the recent.
        if departures.count - oldest > 2 * max(recent.count, 1024) {
            departures = departures[oldest...].filter { recent[$0.device] == $0.number }
            oldest = 0
        }
    }

    /// What the store holds for followed devices (`StoreEvent.devicesRead`); one no longer
    /// followed is ignored by each component.
    func read(_ devices: [DeviceRegistrations]) {
        for stored in devices {
            push.changed(stored.device, stored.push)
            missionRuns.read(stored)
            if let epoch = stored.sealedEpoch { sealed(stored.device, epoch: epoch, announce: false) }
            settings?.read(stored.device, stored.settings)
        }
    }

    /// `device` is sealed at `epoch` (v1.5), kept while this node holds the device: from a read,
    /// or announced to its apps when the store says the robot stored a new one.
    func sealed(_ device: DeviceID, epoch: Int, announce: Bool) {
        guard recent[device] != nil || hub?.sessions(of: device).isEmpty == false else { return }
        hub?.setSealed(device, epoch: epoch, announce: announce)
    }

    private func forget(_ device: DeviceID) {
        followed.unfollow(device)
        push.forget(device)
        missionRuns.forget(device)
        hub?.setSealed(device, epoch: nil, announce: false)
        settings?.forget(device)
    }
}

extension ServedDevices: MetricsReporting {
    func report(to metrics: MetricsSink) {
        metrics.gauge("wimz_devices_followed",
                      "Devices whose push registrations and Live Activity tokens this node holds (served now or lately).",
                      present + recent.count)
    }
}
