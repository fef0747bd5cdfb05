import RelayCore
import RelayStore
import RelayWorkers
import WimzProtocol

/// What the database tells the service thread about mission runs.
enum MissionRunEvent: Sendable {
    /// `device`'s run as stored (nil: none open) and its name, read when it gained a token.
    case loaded(DeviceID, MissionRun?, name: String)
    /// Runs of robots gone long enough that this node ended (deleted) them, with their devices'
    /// tokens read in the same job (most are devices this node does not follow).
    case claimed([(DeviceID, MissionRun, [LiveActivityRegistration])])
}

/// The mission runs of the devices this node serves (docs/protocol.md v1.4 "A mission run"), on the
/// service thread: the Live Activity tokens of the devices it follows (`ServedDevices`; a device
/// with tokens is watched), each watched device's run from the robot's signals (`MissionRun.next`),
/// written behind to the store once a second, read from it with the tokens when the device is
/// followed (so a restart or a move keeps the run), and ended
/// when the robot has been gone `WIMZ_PUSH_OFFLINE_AFTER` — claimed in the store, so exactly one
/// node ends each. What changed goes to the Live Activity sender, with the apps that leave.
final class MissionRuns {
    private let env: RelayEnvironment
    private let hub: DeviceHub
    private let database: DatabaseExchanges
    private let mailbox: Mailbox<ServiceEvent>
    /// The Live Activity tokens of each followed device (an empty list: none, or not read yet).
    private(set) var registrations: [DeviceID: [LiveActivityRegistration]] = [:]
    private var runs: [DeviceID: MissionRun] = [:]
    /// The watched devices' names, read with their runs (a push-to-start shows it).
    private(set) var names: [DeviceID: String] = [:]
    /// Devices whose stored run is being read: their signals wait here, in order.
    private var loading: [DeviceID: [MissionSignal]] = [:]
    /// Runs changed since the last write (nil: ended).
    private var unwritten: [DeviceID: MissionRun?] = [:]
    private var claiming = false
    private var nextClaim: UInt64 = 0
    /// Began, ended by each reason, changed: from zero for `/metrics`.
    private(set) var counts: [String: Int] = ["began": 0, "changed": 0, "completed": 0, "left_mission": 0, "robot_away": 0]
    /// When the relay got what made each open run's current state (whole UNIX seconds).
    private var stateTimes: [DeviceID: Int64] = [:]
    /// The app tokens with a socket here, per device with an open run (whose last socket closes).
    private var localTokens: [DeviceID: Set<Int64>] = [:]
    let sender: LiveActivitySender

    /// Told of each run that ends (the timeline's `mission_run`, v1.6).
    private let timeline: TimelineRecorder

    init(env: RelayEnvironment, hub: DeviceHub, database: DatabaseExchanges, mailbox: Mailbox<ServiceEvent>, sender: LiveActivitySender,
         timeline: TimelineRecorder) {
        self.timeline = timeline
        self.env = env
        self.hub = hub
        self.database = database
        self.mailbox = mailbox
        self.sender = sender
    }

    // MARK: - The followed devices' tokens

    /// `device` is followed from now on; until its tokens and run are read its signals are
    /// watched and wait.
    func follow(_ device: DeviceID) {
        registrations[device] = registrations[device] ?? []
        loading[device] = loading[device] ?? []
        hub.setMissionWatched(device, true)
    }

    /// What the store holds for a followed device (read when it was followed, or again after the
    /// monitor reconnected): its tokens, its run and its name. Without tokens nothing is followed
    /// further; with them, the stored run is taken unless this node's own is newer.
    func read(_ stored: DeviceRegistrations) {
        let device = stored.device
        guard registrations[device] != nil else { return }  // no longer followed
        registrations[device] = stored.liveActivities
        guard !stored.liveActivities.isEmpty else { return watch(device, false) }
        hub.setMissionWatched(device, true)
        takeRun(device, stored.run, name: stored.name, then: loading.removeValue(forKey: device) ?? [])
    }

    /// A followed device's tokens, as they are now.
    func changed(_ device: DeviceID, _ now: [LiveActivityRegistration]) {
        guard let before = registrations[device] else { return }  // no longer followed
        registrations[device] = now
        guard before.isEmpty != now.isEmpty else { return }
        watch(device, !now.isEmpty)
    }

    /// `device` is no longer followed.
    func forget(_ device: DeviceID) {
        registrations[device] = nil
        watch(device, false)
    }

    /// A device gains its first token (its run is read: the robot may be mid-mission) or loses
    /// its last (nothing more is tracked; a stored run stays until it ends or the robot is gone).
    private func watch(_ device: DeviceID, _ watched: Bool) {
        hub.setMissionWatched(device, watched)
        if watched {
            let here = hub.presence(of: device)
            if here.robotSince != nil || here.apps > 0 { readRun(device) }
        } else {
            runs[device] = nil
            loading[device] = nil
            names[device] = nil
        }
    }

    // MARK: - Signals

    func signal(_ device: DeviceID, _ signal: MissionSignal) {
        if loading[device] != nil {
            loading[device]?.append(signal)
            return
        }
        let now = env.clock.wall()
        let previous = runs[device]
        let (run, change) = MissionRun.next(previous, signal, at: now)
        guard let change else { return }
        if case .ended(let state, _) = change, let previous { timeline.missionRun(device, began: previous.openedAt, state: state.contentState) }
        runs[device] = run
        unwritten[device] = .some(run)
        stateTimes[device] = run == nil ? nil : now.seconds
        // Kept current by `presenceChanged` while the run is open: set when it opens.
        if run == nil {
            localTokens[device] = nil
        } else if localTokens[device] == nil {
            localTokens[device] = Set(hub.apps(of: device).map(\.tokenID))
        }
        record(device, change, timestamp: now.seconds)
    }

    /// A socket of `device` came or went: the robot's presence, and apps whose last socket closed
    /// during a run (their activities get the catch-up).
    func presenceChanged(_ device: DeviceID, robotLeftAt: UnixTime?) {
        guard runs[device] != nil || loading[device] != nil else { return }
        if let before = localTokens[device] {
            let now = Set(hub.apps(of: device).map(\.tokenID))
            localTokens[device] = now
            for gone in before.subtracting(now) {
                sender.appLeft(device, appTokenID: gone, tokens: registrations[device] ?? [], runOpen: runs[device] != nil)
            }
        }
        signal(device, .robotOnline(robotLeftAt == nil && hub.presence(of: device).robotSince != nil))
    }

    /// Another node ended `device`'s run: forget it, unless this node serves its robot (then
    /// this node's run is the newer).
    func runEnded(_ device: DeviceID) {
        guard hub.presence(of: device).robotSince == nil else { return }
        runs[device] = nil
        stateTimes[device] = nil
        localTokens[device] = nil
    }

    private func record(_ device: DeviceID, _ change: MissionRunChange, timestamp: Int64,
                        tokens: [LiveActivityRegistration]? = nil) {
        switch change {
        case .began: counts["began", default: 0] += 1
        case .changed: counts["changed", default: 0] += 1
        case .ended(_, let reason): counts[reason.rawValue, default: 0] += 1
        }
        sender.changed(device, change, timestamp: timestamp, tokens: tokens ?? registrations[device] ?? [], robotName: names[device] ?? "")
    }

    private func readRun(_ device: DeviceID) {
        guard loading[device] == nil else { return }
        loading[device] = []
        let mailbox = self.mailbox
        let queued = database.worker.submit({ db in
            let (run, name) = try MissionRunRepository(db).run(of: device)
            mailbox.post(.missionRun(.loaded(device, run, name: name)))
        }, failed: { _ in mailbox.post(.missionRun(.loaded(device, nil, name: ""))) })
        if !queued { loading[device] = nil }
    }

    func handle(_ event: MissionRunEvent) {
        switch event {
        case .loaded(let device, let stored, let name):
            // Only while its read is awaited: the device may have lost its tokens since.
            guard let waiting = loading.removeValue(forKey: device) else { return }
            takeRun(device, stored, name: name, then: waiting)
        case .claimed(let ended):
            claiming = false
            let now = env.clock.wall().seconds
            for (device, run, tokens) in ended {
                runs[device] = nil
                unwritten[device] = nil
                stateTimes[device] = nil
                localTokens[device] = nil
                record(device, .ended(run.state, .robotAway), timestamp: now, tokens: tokens)
                timeline.missionRun(device, began: run.openedAt, state: run.state.contentState)
            }
        }
    }

    /// `device`'s stored run and name, read: taken unless this node's run is newer; the signals
    /// that waited for it (`waiting`, no longer in `loading`) follow.
    private func takeRun(_ device: DeviceID, _ stored: MissionRun?, name: String, then waiting: [MissionSignal]) {
        names[device] = name
        if runs[device] == nil, let stored {
            runs[device] = stored
            stateTimes[device] = env.clock.wall().seconds
            localTokens[device] = Set(hub.apps(of: device).map(\.tokenID))
        }
        for signal in waiting { self.signal(device, signal) }
    }

    // MARK: - Time

    /// Once a second: the changed runs written, and runs of robots gone long enough claimed.
    func tick(now: UInt64) {
        if !unwritten.isEmpty { write() }
        sender.tick(now: now) { [self] device in
            guard let run = runs[device], let time = stateTimes[device] else { return nil }
            return (run.state, time, registrations[device] ?? [])
        }
        // Every node claims, whatever it follows: a run whose node died is ended by another.
        if now >= nextClaim, !claiming {
            claiming = true
            nextClaim = now + 1_000_000_000
            let after = env.configuration.pushOfflineAfterSeconds
            let mailbox = self.mailbox
            let queued = database.worker.submit({ db in
                let ended = try MissionRunRepository(db).claimGone(after: after)
                let tokens = Dictionary(grouping: try LiveActivityRepository(db).registrations(devices: ended.map(\.0)), by: \.device)
                mailbox.post(.missionRun(.claimed(ended.map { ($0.0, $0.1, tokens[$0.0] ?? []) })))
            }, failed: { _ in mailbox.post(.missionRun(.claimed([]))) })
            if !queued { claiming = false }
        }
    }

    /// One batch, in order behind the previous on the database worker; kept for the next tick
    /// when the worker's queue is full. A batch that fails is logged (the next change of each run
    /// writes it whole again).
    private func write() {
        let open = unwritten.compactMap { device, run in run.map { (device, $0) } }
        let ended = unwritten.filter { $0.value == nil }.map(\.key)
        let log = env.log
        let queued = database.worker.submit({ db in try MissionRunRepository(db).write(open: open, ended: ended) },
                                            failed: { error in log.warning("mission_runs_unwritten", metadata: ["error": "\(error)"]) })
        if queued { unwritten = [:] }
    }
}

extension MissionRuns: MetricsReporting {
    func report(to metrics: MetricsSink) {
        for (event, n) in counts.sorted(by: { $0.key < $1.key }) {
            metrics.counter("wimz_mission_runs_total", "Mission runs begun, changed and ended (by reason) on this node.", [("event", event)], n)
        }
        metrics.gauge("wimz_mission_runs_open", "Mission runs this node follows.", runs.count)
    }
}
