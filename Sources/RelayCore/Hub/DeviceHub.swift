#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
import WimzProtocol
#endif

/// Pairing and routing (docs/protocol.md "Frames on the sockets"): the device table and every rule about who
/// receives what. Owned by the service thread; pure logic over `Session`s, so it is tested
/// without sockets.
public final class DeviceHub {
    /// Per-device state. `robot`/`apps` are the sessions routed to.
    final class Device {
        let id: DeviceID
        var robot: Session?
        var apps: [Session] = []
        /// When the robot last came online or went offline (for `device_status.since`).
        var statusSince: UnixTime
        /// Latest event of each replayed name (indexed like `DeviceHub.replayNames`). One array of
        /// slots, so that remembering an event is one write (one uniqueness check, not three);
        /// made at the first replayed event (`prepareReplay`): an entry made for an app whose robot
        /// has sent none allocates no slots.
        var replay: [Replayed?] = []
        /// A replayed event changed since the state was last taken (see `takeChangedState`).
        var stateChanged = false
        /// Phones are registered for pushes of this device (see `DeviceHub+Push.swift`).
        var pushWatched = false
        /// Apps handed over Live Activity tokens for this device: its mission signals are read.
        var missionWatched = false
        /// The numbered history, once a recovering app attached (it stays while the device does).
        var history: DeviceHistory?
        var recoveringApps = 0
        /// Resuming apps waiting for a hand-off (their epoch is another node's), until `parkedUntil`;
        /// meanwhile the robot's broadcasts wait in `held` (so numbering stays one sequence).
        var parked: [Session] = []
        var parkedUntil: UInt64 = 0
        var held: [Payload] = []
        /// Relay command id → the app that sent it and its own id token.
        var pending: [UInt64: (app: Session, idToken: [UInt8])] = [:]
        var pendingOrder: [UInt64] = []
        var pendingHead = 0
        /// The device's current epoch when it is sealed (v1.5): only sealed frames pass then.
        var sealedEpoch: Int?
        /// The robot was online on another node since then and is moving here (cluster handoff).
        var carriedOnlineSince: (since: UnixTime, until: UInt64)?

        init(id: DeviceID, since: UnixTime) {
            self.id = id
            statusSince = since
        }

        /// Makes the replay's `count` slots (one per replayed name) before the first is written.
        func prepareReplay(_ count: Int) {
            if replay.isEmpty { replay = Array(repeating: nil, count: count) }
        }

        var isEmpty: Bool { robot == nil && apps.isEmpty && parked.isEmpty }
        /// The robot (if any) and the apps.
        var sessions: [Session] { (robot.map { [$0] } ?? []) + apps }
        /// Something apps that connect later must get: replayed events, or a numbering that a
        /// resume may continue (even with nothing in it yet: a resume then has missed nothing).
        var hasReplay: Bool { replay.contains { $0 != nil } || history != nil }
    }

    public let limits: Limits
    /// How long a handed-over online time waits for the moving robot (nanoseconds).
    static let handoffValidity: UInt64 = 30_000_000_000
    /// Replayed event names, sorted; matched by length and bytes (no hashing on the hot path).
    let replayNames: [[UInt8]]
    /// The robot events that may become pushes, by name (sorted, matched like `replayNames`).
    let pushEvents: [(name: [UInt8], kind: PushKind)]
    /// The push kinds a sealed frame's `kind` may name (v1.5: the kind itself, not an event name).
    let sealedPushKinds: [(name: [UInt8], kind: PushKind)]
    /// A finished mission's status as it ends in the event's bytes: most progress events lack it
    /// and are passed over without being read.
    let completedNeedle = Array((MissionRun.completedStatus + "\"").utf8)
    /// Devices with push registrations (kept by the server); their entries are `pushWatched`.
    var pushWatchedDevices: Set<DeviceID> = []
    /// Devices with Live Activity tokens (kept by the server); their entries are `missionWatched`.
    var missionWatchedDevices: Set<DeviceID> = []
    /// Sealed devices this node follows, with their current epoch (v1.5; `DeviceHub+Sealed.swift`).
    var sealedDevices: [DeviceID: Int] = [:]
    /// Devices whose replayed events changed since `takeChangedState` last ran.
    var changedState: [Device] = []
    private var devices: [DeviceID: Device] = [:]
    private let startedAt: UnixTime

    /// Who hears of drops, replaced robots, arrivals, presence, HTTP answers and push events
    /// (`DeviceHubObserver`): the server's composition root. Weak: the root owns the hub's users.
    public weak var observer: DeviceHubObserver?
    /// Messages and bytes accepted for forwarding, by direction: plain fields bumped on the
    /// forwarding path (a closure into the server's counters cost ~150 instructions a message).
    public internal(set) var forwarded = ForwardedCounts()
    /// Whether other nodes are live (set by the server): then a resume with an unknown epoch
    /// waits `Limits.resumeWait` for the device's hand-off.
    public var clustered = false
    /// Devices with parked resumes (see `Device.parked`).
    private var parkedDevices: Set<DeviceID> = []
    /// The time of what the hub does on its own (closing a slow consumer, say); what callers do
    /// comes with its time.
    let clock: RelayClock

    /// Message buffers for reuse: the receive path copies messages into them; the writer and the
    /// replay slots give back the ones they held last (service thread).
    public let payloads = PayloadPool()

    /// The node's history budget: what every device's history holds, and what was dropped.
    public internal(set) var historyMemory: HistoryMemory

    public init(limits: Limits, clock: RelayClock) {
        self.clock = clock
        self.limits = limits
        historyMemory = HistoryMemory(limit: limits.historyMemory)
        replayNames = limits.replayEvents.sorted().map { Array($0.utf8) }
        pushEvents = limits.pushKinds.compactMap { kind in kind.robotEvent.map { (Array($0.utf8), kind) } }
            .sorted { $0.name.lexicographicallyPrecedes($1.name) }
        sealedPushKinds = limits.pushKinds.filter { $0.robotEvent != nil }.map { (Array($0.rawValue.utf8), $0) }
        startedAt = clock.wall()
    }

    /// A session and its device entry refer to each other while attached (routing needs no
    /// lookup); a hub that goes away unlinks what is still attached.
    deinit {
        for device in devices.values {
            device.robot?.device = nil
            for app in device.apps { app.device = nil }
        }
    }

    public var deviceCount: Int { devices.count }
    /// `id`'s entry, if this node holds one.
    func entry(_ id: DeviceID) -> Device? { devices[id] }
    public func robot(of device: DeviceID) -> Session? { devices[device]?.robot }
    public func apps(of device: DeviceID) -> [Session] { devices[device]?.apps ?? [] }

    /// The sessions of `device` on this node.
    public func sessions(of device: DeviceID) -> [Session] { devices[device]?.sessions ?? [] }

    /// Every session routed to, for sweeps (keepalive, revocation, shutdown).
    public var allSessions: [Session] {
        devices.values.flatMap(\.sessions)
    }

    /// Whether one more app of `device` fits under the cap.
    public func hasRoomForApp(_ device: DeviceID) -> Bool {
        (devices[device]?.apps.count ?? 0) < limits.maxAppsPerDevice
    }

    /// Presence: robot online and since when.
    public func status(of device: DeviceID) -> (online: Bool, since: UnixTime, apps: Int) {
        guard let d = devices[device] else { return (false, startedAt, 0) }
        return (d.robot != nil, d.statusSince, d.apps.count)
    }

    /// Presence as a cluster row needs it: the robot's online time (nil: offline) and the apps.
    public func presence(of device: DeviceID) -> (robotSince: UnixTime?, apps: Int) {
        guard let d = devices[device] else { return (nil, 0) }
        return (d.robot != nil ? d.statusSince : nil, d.apps.count)
    }

    /// Every device with an entry (sockets or remembered events).
    public var deviceIDs: [DeviceID] { Array(devices.keys) }

    // MARK: - Attach / detach

    /// `device`'s entry, created (status time `wallClock`) if it has none.
    func entry(for device: DeviceID, wallClock: UnixTime) -> Device {
        if let d = devices[device] { return d }
        let d = Device(id: device, since: wallClock)
        d.pushWatched = pushWatchedDevices.contains(device)
        d.missionWatched = missionWatchedDevices.contains(device)
        d.sealedEpoch = sealedDevices[device]
        devices[device] = d
        return d
    }

    /// Routes to a newly authenticated session and sends the greetings the contract requires.
    public func attach(_ session: Session, now: UInt64, wallClock: UnixTime) {
        let device = entry(for: session.deviceID, wallClock: wallClock)
        let arrived = device.isEmpty
        session.device = device
        defer {
            if arrived { observer?.hubDeviceArrived(device.id) }
            observer?.hubPresenceChanged(device.id, robotLeftAt: nil)
        }
        switch session.role {
        case .robot:
            if let old = device.robot {
                old.device = nil
                old.close(.replaced, reason: "replaced")
                observer?.hubReplacedRobot(old, with: session)
            } else {
                if let carried = device.carriedOnlineSince, now < carried.until {
                    device.statusSince = carried.since
                } else {
                    device.statusSince = wallClock
                }
                device.carriedOnlineSince = nil
            }
            device.robot = session
            announce(device, online: true, since: device.statusSince)
            deliver(RelayMessages.appPresence(apps: device.apps.count), to: session)
        case .app:
            session.rateLimiter = TokenBucket(rate: limits.appRate, burst: limits.appBurst, now: now)
            if case .resume(let epoch, _)? = session.recovery, clustered, device.history?.epoch != epoch {
                // Its numbering is another node's: the device's hand-off may be on its way.
                if device.parked.isEmpty { device.parkedUntil = now + limits.resumeWait }
                device.parked.append(session)
                parkedDevices.insert(device.id)
                return
            }
            greet(session, device: device, now: now)
        }
    }

    /// Sends a newly attached app its greeting (device_status, then the replay or, for a
    /// recovering app, what it missed) and starts routing to it.
    private func greet(_ session: Session, device: Device, now: UInt64) {
        device.apps.append(session)
        if let recovery = session.recovery {
            let history = device.history ?? DeviceHistory(epoch: DeviceHistory.newEpoch(), limits: limits.history)
            device.history = history
            historyMemory.resumed(device.id, history)
            device.recoveringApps += 1
            var missed: [(seq: UInt64, payload: Payload)]?
            if case .resume(let epoch, let seq) = recovery, epoch == history.epoch {
                missed = history.messages(after: seq, now: now)
            }
            let resumed: Bool? = if case .resume = recovery { missed != nil } else { nil }
            deliver(RelayMessages.deviceStatus(device.id, online: device.robot != nil, since: device.statusSince,
                                               history: (history.epoch, history.lastSeq), recovered: resumed,
                                               member: session.member), to: session)
            if let missed {
                for m in missed { deliver(m.payload, numbering: Numbering.of(m.payload, seq: m.seq), to: session) }
            } else {
                for case let event? in device.replay {
                    deliver(event.payload, numbering: event.seq > 0 ? Numbering.of(event.payload, seq: event.seq) : nil, to: session)
                }
            }
        } else {
            deliver(RelayMessages.deviceStatus(device.id, online: device.robot != nil, since: device.statusSince,
                                               member: session.member), to: session)
            for case let event? in device.replay { deliver(event.payload, to: session) }
        }
        tellPresence(device)
    }

    /// Greets the parked resumes of `device` after the robot's held broadcasts went out
    /// (numbered): the hand-off arrived or the wait is over.
    func releaseParked(_ device: Device, now: UInt64) {
        guard !device.parked.isEmpty else { return }
        let parked = device.parked
        let held = device.held
        device.parked = []
        device.held = []
        parkedDevices.remove(device.id)
        for payload in held { broadcast(payload, envelope: payload.withBytes(Envelope.scan), device: device, now: now) }
        for session in parked where session.device === device { greet(session, device: device, now: now) }
    }

    /// Ends waits for hand-offs that did not come (a crashed node's devices): those apps resume
    /// here with `recovered:false`. Call every wheel tick.
    public func expireParked(now: UInt64) {
        guard !parkedDevices.isEmpty else { return }
        for id in parkedDevices {
            guard let d = devices[id] else {
                parkedDevices.remove(id)  // the device went (moved on)
                continue
            }
            if d.parkedUntil <= now { releaseParked(d, now: now) }
        }
    }

    /// Both kinds of `device_status` a robot change sends: v1, and with the history for recovering apps.
    /// Each is built only if an app is there to get it (a robot usually connects to none).
    private func announce(_ device: Device, online: Bool, since: UnixTime) {
        guard !device.apps.isEmpty else { return }
        let numbered = device.recoveringApps == 0 ? nil : device.history.map {
            RelayMessages.deviceStatus(device.id, online: online, since: since, history: ($0.epoch, $0.lastSeq))
        }
        var plain: Payload?
        for app in device.apps {
            if app.recovers, let numbered {
                deliver(numbered, to: app)
                continue
            }
            plain = plain ?? RelayMessages.deviceStatus(device.id, online: online, since: since)
            deliver(plain!, to: app)
        }
    }

    /// Stops routing to `session` (closed, culled, revoked). Idempotent.
    public func detach(_ session: Session) {
        let now = clock.monotonic(), wallClock = clock.wall()
        guard let device = session.device else { return }
        session.device = nil
        switch session.role {
        case .robot:
            guard device.robot === session else { return }
            device.robot = nil
            device.statusSince = wallClock
            device.pending.removeAll()
            device.pendingOrder.removeAll()
            device.pendingHead = 0
            announce(device, online: false, since: wallClock)
            observer?.hubPresenceChanged(device.id, robotLeftAt: wallClock)
        case .app:
            if let k = device.parked.firstIndex(where: { $0 === session }) {
                device.parked.remove(at: k)
                if device.parked.isEmpty { releaseParked(device, now: now) }
                break
            }
            device.apps.removeAll { $0 === session }
            if session.recovers { device.recoveringApps -= 1 }
            tellPresence(device)
            observer?.hubPresenceChanged(device.id, robotLeftAt: nil)
        }
        guard device.isEmpty else { return }
        observer?.hubDeviceLeft(device.id)
        if !device.hasReplay { remove(device) }
    }

    /// Forgets `device`, and what its history held.
    func remove(_ device: Device) {
        if let history = device.history { historyMemory.release(device.id, history) }
        devices[device.id] = nil
    }

    /// Drops history older than its age limit (idle devices keep nothing); once a second.
    public func sweepHistories(now: UInt64) { historyMemory.sweep(now: now) }

    /// Forgets `device` if no socket of it is left (its remembered events went to another node).
    public func forget(_ device: DeviceID) {
        if let entry = devices[device], entry.isEmpty { remove(entry) }
    }

    // MARK: - Routing

    /// Routes one complete message received from `session`. `now` is monotonic nanoseconds.
    public func receive(_ payload: Payload, from session: Session, now: UInt64) {
        session.messagesIn += 1
        session.bytesIn += payload.count
        guard let device = session.device else { return }
        switch session.role {
        case .robot: fromRobot(payload, session: session, device: device, now: now)
        case .app: fromApp(payload, session: session, device: device, now: now)
        }
    }

    private func fromRobot(_ payload: Payload, session: Session, device: Device, now: UInt64) {
        let envelope = payload.isBinary ? .opaque : payload.withBytes(Envelope.scan)
        // `settings_applied` passes as `lock_screen` does: its document is sealed (v1.6).
        if device.sealedEpoch != nil, envelope.kind != .sealed, envelope.kind != .lockScreen, envelope.kind != .settingsApplied {
            observer?.hubDropped(.unsealed)  // no app of a sealed device would open it
            return
        }
        switch envelope.kind {
        case .settingsApplied:
            observer?.hubSettingsApplied(device.id, payload)
        case .response:
            routeResponse(payload, envelope: envelope, device: device)
        case .httpResponse, .httpBody:
            observer?.hubRobotAnsweredHTTP(payload, from: session)
        case .lockScreen:
            // The relay's own input for the lock screen (v1.5); apps open the sealed mission_progress.
            if device.missionWatched, let signal = payload.withBytes({ missionSignal($0, envelope) }) {
                observer?.hubMissionSignal(device.id, signal)
            }
        default:
            // While resumes wait for a hand-off, broadcasts wait too (bounded), so the history
            // numbers them after the handed-over ones.
            if !device.parked.isEmpty, device.held.count < limits.history.maxMessages {
                device.held.append(payload)
                return
            }
            broadcast(payload, envelope: envelope, device: device, now: now)
        }
    }

    /// A robot message for every app: remembered for the replay (events), numbered into the
    /// history (JSON objects, once a recovering app attached), delivered — the one buffer to
    /// every app; recovering apps' copies get their number from the writer (`Numbering`).
    private func broadcast(_ payload: Payload, envelope: Envelope, device: Device, now: UInt64) {
        var seq: UInt64 = 0
        let pushable = device.pushWatched ? payload.withBytes { pushKind($0, envelope) } : nil
        // A phone woken for an event resumes from its number: from its first push-worthy event
        // on, the device is numbered (as for a recovering app).
        if pushable != nil, device.history == nil {
            device.history = DeviceHistory(epoch: DeviceHistory.newEpoch(), limits: limits.history)
        }
        if let history = device.history, envelope.kind != .opaque {
            seq = history.append(payload, now: now, used: &historyMemory.used)
            if !history.isListed { historyMemory.resumed(device.id, history) }
            if historyMemory.used > historyMemory.limit { historyMemory.evict() }
        }
        if let pushable, let history = device.history { observer?.hubPushEvent(device.id, kind: pushable, message: payload, place: (history.epoch, seq)) }
        if device.missionWatched, let signal = payload.withBytes({ missionSignal($0, envelope) }) {
            observer?.hubMissionSignal(device.id, signal)
        }
        if let kept = payload.withBytes({ TimelineRules.keptName($0, envelope) }) { observer?.hubTimelineEntry(device.id, name: kept, payload) }
        if envelope.kind == .event || envelope.kind == .sealed, let name = envelope.eventName,
           let index = payload.withBytes({ replayIndex(of: $0, name) }) {
            device.prepareReplay(replayNames.count)
            var replaced = device.replay[index].take()
            device.replay[index] = Replayed(payload: payload, seq: seq, at: now)
            // In place: a copy (`if var replaced`) is a second reference, and the pool, seeing
            // the buffer shared, would never take it back.
            if replaced != nil { payloads.recycle(&replaced!.payload) }
            if !device.stateChanged {
                device.stateChanged = true
                changedState.append(device)
            }
        }
        if device.apps.isEmpty { observer?.hubDropped(.noApps); return }
        let numbering = seq > 0 && device.recoveringApps > 0 ? Numbering.of(payload, seq: seq) : nil
        // The local copy of the list keeps every app alive (a slow consumer detached by `deliver`
        // changes `device.apps`, not this copy), so each is used without a retain and release of
        // its own (two per app and message otherwise).
        let apps = device.apps
        apps.withUnsafeBufferPointer { list in
            for k in list.indices {
                Unmanaged.passUnretained(list[k])._withUnsafeGuaranteedRef { app in
                    deliver(payload, numbering: app.recovers ? numbering : nil, to: app)
                }
            }
        }
        forwarded.robotToApps.add(payload.count)
    }

    /// `app_presence` for the robot after an app came or went. Apps cause it, so a full robot
    /// queue skips it (the next change or the robot's reconnect tells the count) rather than
    /// closing the robot.
    private func tellPresence(_ device: Device) {
        guard let robot = device.robot, robot.closing == nil else { return }
        if !robot.enqueue(RelayMessages.appPresence(apps: device.apps.count)) { observer?.hubDropped(.refused(.robotBusy)) }
    }

    /// Queues `payload` for `session`; a full queue closes it as a slow consumer (4008) without
    /// delaying anyone else.
    public func deliver(_ payload: Payload, numbering: Numbering? = nil, to session: Session) {
        guard session.closing == nil else { return }
        if !session.enqueue(payload, numbering: numbering) {
            observer?.hubDropped(.queueFull)
            close(session, .slowConsumer, reason: "slow consumer")
        }
    }
}
