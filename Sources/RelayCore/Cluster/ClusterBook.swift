/// The service thread's cluster bookkeeping (docs/cluster.md), pure so it is tested without a
/// database: which devices' presence changed since the last batch, which devices this node must
/// claim, and the damping that keeps a flapping balancer from bouncing a device between nodes.
///
/// Rule: the node that accepted a device's first socket last owns the device. It claims the
/// device (one NOTIFY per batch); any other node holding sockets of it closes them with 1012,
/// and the clients reconnect through the balancer, which sends them where it sent the claimer's.
public struct ClusterBook {
    /// A device that came back within this many nanoseconds after this node gave it up is
    /// claimed only when the window has passed (a balancer flapping between nodes moves each
    /// device at most once per window instead of on every flap).
    public var dampingWindow: UInt64

    /// Devices whose presence row must be rewritten, with the robot's offline time if it left.
    private var dirty: [DeviceID: UnixTime?] = [:]
    private var claims: [DeviceID] = []
    /// Claims held back by damping: device → when it may be claimed.
    private var deferred: [DeviceID: UInt64] = [:]
    /// When this node last gave each device up (pruned after the window).
    private var yielded: [DeviceID: UInt64] = [:]

    public init(dampingWindow: UInt64) { self.dampingWindow = dampingWindow }

    /// Whether anything waits for a batch (deferred claims included).
    public var hasWork: Bool { !dirty.isEmpty || !claims.isEmpty || !deferred.isEmpty }
    public var deferredCount: Int { deferred.count }

    /// A device's first socket on this node arrived: claim it now, or after the damping window.
    public mutating func deviceArrived(_ device: DeviceID, now: UInt64) {
        // `yielded` is empty unless this node gave devices up lately: then no lookup (a hash of the id).
        if !yielded.isEmpty, let at = yielded[device], now &- at < dampingWindow {
            deferred[device] = at + dampingWindow
        } else {
            claims.append(device)
        }
        changed(device)
    }

    /// A socket of `device` came or went. `robotLeftAt`: the robot went offline then.
    public mutating func changed(_ device: DeviceID, robotLeftAt: UnixTime? = nil) {
        if let robotLeftAt {
            dirty[device] = .some(robotLeftAt)
        } else {
            // Marked, a robot-left time already noted kept: the default subscript's in-place
            // access finds or inserts with one hash of the id (a read, then a write, took two).
            dirty[device, default: nil].keep()
        }
    }

    /// This node gave `device` up to another node's claim.
    public mutating func yieldedDevice(_ device: DeviceID, now: UInt64) {
        yielded[device] = now
        deferred[device] = nil
    }

    /// Every device must be written again (the node re-registered after losing its lease).
    public mutating func markAll(_ devices: some Sequence<DeviceID>) {
        for device in devices where dirty[device] == nil { dirty[device] = .some(nil) }
    }

    /// Takes what is due: the presence rows (`status` reads the hub: robot since, apps) and
    /// the claims, including deferred ones whose window has passed and whose device is still here.
    public mutating func takeBatch(now: UInt64, status: (DeviceID) -> (robotSince: UnixTime?, apps: Int))
        -> (rows: [PresenceRow], claims: [DeviceID]) {
        for (device, due) in deferred where due <= now {
            deferred[device] = nil
            let s = status(device)
            if s.robotSince != nil || s.apps > 0 { claims.append(device) }
        }
        if yielded.count > 1024 { yielded = yielded.filter { now &- $0.value < dampingWindow } }
        let rows = dirty.map { device, leftAt in
            let s = status(device)
            return PresenceRow(deviceID: device, robotSince: s.robotSince, apps: s.apps, robotLeftAt: leftAt ?? nil)
        }
        let taken = claims
        dirty.removeAll(keepingCapacity: true)
        claims.removeAll(keepingCapacity: true)
        return (rows, taken)
    }
}

private extension Optional {
    /// Nothing: an in-place access through `Dictionary`'s default subscript that only inserts.
    mutating func keep() {}
}
