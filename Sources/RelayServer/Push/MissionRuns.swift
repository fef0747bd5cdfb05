import RelayCore
import RelayStore

/// What the database tells the service thread about mission runs.
enum MissionRunEvent: Sendable {
    /// `device`'s run as stored (nil: none open), read when the device arrived here.
    case loaded(DeviceID, MissionRun?)
    /// Runs of robots gone long enough that this node ended (deleted) them.
    case claimed([(DeviceID, MissionRun)])
}

/// The mission runs of the devices this node serves (docs/protocol.md v1.4 "A mission run"), on the
/// service thread: the Live Activity token mirror (which devices are watched), each watched
/// device's run from the robot's signals (`MissionRun.next`), written behind to the store once a
/// second, read from it when a device arrives (so a restart or a move keeps the run), and ended
/// when the robot has been gone `WIMZ_PUSH_OFFLINE_AFTER` — claimed in the store, so exactly one
/// node ends each. What changed goes to `onChange` (the Live Activity sender).
final class MissionRuns {
    private let env: RelayEnvironment
    private let hub: DeviceHub
    private let database: DatabaseExchanges
    private let mailbox: Mailbox<ServiceEvent>
    /// Every device's Live Activity tokens (the store's, through notifications).
    private(set) var registrations: [DeviceID: [LiveActivityRegistration]] = [:]
    private var runs: [DeviceID: MissionRun] = [:]
    /// Devices whose stored run is being read: their signals wait here, in order.
    private var loading: [DeviceID: [MissionSignal]] = [:]
    /// Runs changed since the last write (nil: ended).
    private var unwritten: [DeviceID: MissionRun?] = [:]
    private var claiming = false
    private var nextClaim: UInt64 = 0
    /// Began, ended by each reason, changed: from zero for `/metrics`.
    private(set) var counts: [String: Int] = ["began": 0, "changed": 0, "completed": 0, "left_mission": 0, "robot_away": 0]
    var onChange: ((DeviceID, MissionRunChange) -> Void)?

    init(env: RelayEnvironment, hub: DeviceHub, database: DatabaseExchanges, mailbox: Mailbox<ServiceEvent>) {
        self.env = env
        self.hub = hub
        self.database = database
        self.mailbox = mailbox
    }

    /// The open run of `device` as this node holds it.
    func run(of device: DeviceID) -> MissionRun? { runs[device] }

    // MARK: - The token mirror

    func load(_ all: [LiveActivityRegistration]) {
        let before = Set(registrations.keys)
        registrations = Dictionary(grouping: all, by: \.device)
        for device in before.subtracting(registrations.keys) { watch(device, false) }
        for device in registrations.keys where !before.contains(device) { watch(device, true) }
    }

    func changed(_ device: DeviceID, _ now: [LiveActivityRegistration]) {
        let was = registrations[device] != nil
        registrations[device] = now.isEmpty ? nil : now
        if was != !now.isEmpty { watch(device, !now.isEmpty) }
    }

    /// A device gains its first token (its run is read: the robot may be mid-mission) or loses
    /// its last (nothing more is tracked; a stored run stays until it ends or the robot is gone).
    private func watch(_ device: DeviceID, _ watched: Bool) {
        hub.setMissionWatched(device, watched)
        if watched {
            if hub.presence(of: device).robotSince != nil || hub.presence(of: device).apps > 0 { read(device) }
        } else {
            runs[device] = nil
            loading[device] = nil
        }
    }

    // MARK: - Signals

    /// The first socket of `device` attached here: its stored run, if it is watched.
    func deviceArrived(_ device: DeviceID) {
        if registrations[device] != nil { read(device) }
    }

    func signal(_ device: DeviceID, _ signal: MissionSignal) {
        if loading[device] != nil {
            loading[device]?.append(signal)
            return
        }
        let (run, change) = MissionRun.next(runs[device], signal, at: env.clock.wall())
        guard let change else { return }
        runs[device] = run
        unwritten[device] = .some(run)
        record(device, change)
    }

    /// The robot connected or left (its node's presence changed).
    func presenceChanged(_ device: DeviceID, robotLeftAt: UnixTime?) {
        guard runs[device] != nil || loading[device] != nil else { return }
        signal(device, .robotOnline(robotLeftAt == nil && hub.presence(of: device).robotSince != nil))
    }

    /// Another node ended `device`'s run: forget it, unless this node serves its robot (then
    /// this node's run is the newer).
    func runEnded(_ device: DeviceID) {
        guard hub.presence(of: device).robotSince == nil else { return }
        runs[device] = nil
    }

    private func record(_ device: DeviceID, _ change: MissionRunChange) {
        switch change {
        case .began: counts["began", default: 0] += 1
        case .changed: counts["changed", default: 0] += 1
        case .ended(_, let reason): counts[reason.rawValue, default: 0] += 1
        }
        onChange?(device, change)
    }

    private func read(_ device: DeviceID) {
        guard loading[device] == nil else { return }
        loading[device] = []
        let mailbox = self.mailbox
        let queued = database.worker.submit({ db in
            mailbox.post(.missionRun(.loaded(device, try MissionRunRepository(db).run(of: device))))
        }, failed: { _ in mailbox.post(.missionRun(.loaded(device, nil))) })
        if !queued { loading[device] = nil }
    }

    func handle(_ event: MissionRunEvent) {
        switch event {
        case .loaded(let device, let stored):
            guard let waiting = loading.removeValue(forKey: device) else { return }
            if runs[device] == nil { runs[device] = stored }
            for signal in waiting { self.signal(device, signal) }
        case .claimed(let ended):
            claiming = false
            for (device, run) in ended {
                runs[device] = nil
                unwritten[device] = nil
                record(device, .ended(run.state, .robotAway))
            }
        }
    }

    // MARK: - Time

    /// Once a second: the changed runs written, and runs of robots gone long enough claimed.
    func tick(now: UInt64) {
        if !unwritten.isEmpty { write() }
        if now >= nextClaim, !claiming, !registrations.isEmpty {
            claiming = true
            nextClaim = now + 1_000_000_000
            let after = env.configuration.pushOfflineAfterSeconds
            let mailbox = self.mailbox
            let queued = database.worker.submit({ db in
                mailbox.post(.missionRun(.claimed(try MissionRunRepository(db).claimGone(after: after))))
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
