import RelayCore

/// The devices whose push registrations, Live Activity tokens and mission run the relay holds
/// (those it serves, and a bounded number it served lately), and those of them still to be read.
/// The service thread follows and unfollows and never waits; the store monitor reads what is
/// queued in one transaction per batch (`StoreEvent.devicesRead`), and reads a followed device
/// again when the store says its registrations changed — for any other device it reads nothing,
/// so a node holds and reads what its own clients need, not the fleet's. Thread-safe.
public final class FollowedDevices: Sendable {
    private let state = Locked((followed: Set<DeviceID>(), queued: Set<DeviceID>()))
    private let onQueued = Locked<(@Sendable () -> Void)?>(nil)

    public init() {}

    /// Follows `device` and asks for what it holds (answered by `StoreEvent.devicesRead`).
    public func follow(_ device: DeviceID) {
        let first = state.withLock { s -> Bool in
            s.followed.insert(device)
            return s.queued.insert(device).inserted && s.queued.count == 1
        }
        if first { onQueued.current?() }  // the first of a batch wakes the monitor, as `CredentialQueue` does
    }

    /// Stops following `device`: its changes are no longer read (a read under way may still answer).
    public func unfollow(_ device: DeviceID) {
        state.withLock {
            $0.followed.remove(device)
            $0.queued.remove(device)
        }
    }

    /// Devices followed now.
    public var count: Int { state.withLock { $0.followed.count } }

    /// Whether a change of `device`'s registrations is to be read (the monitor's thread).
    func isFollowed(_ device: DeviceID) -> Bool { state.withLock { $0.followed.contains(device) } }

    /// Every device queued, taken off the queue (the monitor's thread).
    func take() -> [DeviceID] {
        state.withLock { s in
            defer { s.queued = [] }
            return Array(s.queued)
        }
    }

    /// Puts back devices whose read failed (those still followed): read again after the reconnect.
    func putBack(_ devices: [DeviceID]) {
        state.withLock { s in s.queued.formUnion(devices.filter { s.followed.contains($0) }) }
    }

    /// Queues every followed device: after a reconnect, changes may have been missed.
    func readAllAgain() {
        state.withLock { $0.queued = $0.followed }
    }

    /// Devices queued now (the monitor waits for more when they are few).
    var waiting: Int { state.withLock { $0.queued.count } }

    /// Who to wake when something is queued (the monitor's thread).
    func whenQueued(_ wake: @escaping @Sendable () -> Void) { onQueued.withLock { $0 = wake } }
}

/// What a node holds for a device it serves, as the store has it: read when the device arrives,
/// kept current by notifications while it is followed.
public struct DeviceRegistrations: Sendable {
    public let device: DeviceID
    public var push: [PushRegistration]
    public var liveActivities: [LiveActivityRegistration]
    /// The device's open mission run, if any.
    public var run: MissionRun?
    /// The device's name (a push-to-start shows it).
    public var name: String
    /// The device's current epoch when it is sealed (v1.5).
    public var sealedEpoch: Int?

    public init(device: DeviceID, push: [PushRegistration] = [], liveActivities: [LiveActivityRegistration] = [],
                run: MissionRun? = nil, name: String = "", sealedEpoch: Int? = nil) {
        self.device = device
        self.push = push
        self.liveActivities = liveActivities
        self.run = run
        self.name = name
        self.sealedEpoch = sealedEpoch
    }
}
