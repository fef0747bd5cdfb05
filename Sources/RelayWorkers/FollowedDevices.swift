import RelayCore
import WimzProtocol

/// The devices whose push registrations, Live Activity tokens and mission run the relay holds
/// (those it serves, and a bounded number it served lately), and those of them still to be read.
/// The service thread follows and unfollows and never waits; the store monitor reads what is
/// queued in batches (`StoreEvent.devicesRead`, `DeviceReadSchedule`), and reads a followed device
/// again when the store says its registrations changed — for any other device it reads nothing,
/// so a node holds and reads what its own clients need, not the fleet's. Thread-safe.
public final class FollowedDevices: Sendable {
    /// `queuedSince`: when the queue last went from empty to not (nil while empty).
    private let state = Locked((followed: Set<DeviceID>(), queued: Set<DeviceID>(), queuedSince: UInt64?.none))
    private let onQueued = Locked<(@Sendable () -> Void)?>(nil)

    public init() {}

    /// Follows `device` and asks for what it holds (answered by `StoreEvent.devicesRead`).
    public func follow(_ device: DeviceID) {
        let first = state.withLock { s -> Bool in
            s.followed.insert(device)
            let first = s.queued.insert(device).inserted && s.queued.count == 1
            FollowedDevices.stamp(&s)
            return first
        }
        if first { onQueued.current?() }  // the first of a batch wakes the monitor, as `CredentialQueue` does
    }

    /// Stops following `device`: its changes are no longer read (a read under way may still answer).
    public func unfollow(_ device: DeviceID) {
        state.withLock {
            $0.followed.remove(device)
            $0.queued.remove(device)
            FollowedDevices.stamp(&$0)
        }
    }

    /// Devices followed now.
    public var count: Int { state.withLock { $0.followed.count } }

    /// Whether a change of `device`'s registrations is to be read (the monitor's thread).
    func isFollowed(_ device: DeviceID) -> Bool { state.withLock { $0.followed.contains(device) } }

    /// Up to `limit` of the devices queued, taken off the queue (the monitor's thread). Those
    /// left keep their place: they are due as soon as the first of them was.
    func take(upTo limit: Int = .max) -> [DeviceID] {
        state.withLock { s in
            let taken = Array(s.queued.prefix(limit))
            s.queued.subtract(taken)
            FollowedDevices.stamp(&s)
            return taken
        }
    }

    /// Puts back devices whose read failed (those still followed): read again after the reconnect.
    func putBack(_ devices: [DeviceID]) {
        state.withLock { s in
            s.queued.formUnion(devices.filter { s.followed.contains($0) })
            FollowedDevices.stamp(&s)
        }
    }

    /// Queues every followed device: after a reconnect, changes may have been missed.
    func readAllAgain() {
        state.withLock { s in
            s.queued = s.followed
            FollowedDevices.stamp(&s)
        }
    }

    /// After any change of the queue: `queuedSince` is set when it goes from empty to not, kept
    /// while it holds devices, and cleared when it empties.
    private static func stamp(_ s: inout (followed: Set<DeviceID>, queued: Set<DeviceID>, queuedSince: UInt64?)) {
        s.queuedSince = s.queued.isEmpty ? nil : s.queuedSince ?? MonotonicClock.nanoseconds()
    }

    /// When the longest-queued device was queued (nil: none is), for `DeviceReadSchedule`.
    var oldestQueuedAt: UInt64? { state.withLock { $0.queuedSince } }

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
    /// The versions of the device's settings, when it has any (v1.6).
    public var settings: SettingsVersions?

    public init(device: DeviceID, push: [PushRegistration] = [], liveActivities: [LiveActivityRegistration] = [],
                run: MissionRun? = nil, name: String = "", sealedEpoch: Int? = nil, settings: SettingsVersions? = nil) {
        self.device = device
        self.push = push
        self.liveActivities = liveActivities
        self.run = run
        self.name = name
        self.sealedEpoch = sealedEpoch
        self.settings = settings
    }
}
