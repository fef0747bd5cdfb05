import RelayCore
import RelayStore
import RelayWorkers

/// The robot's settings on the sockets (docs/protocol.md "The robot's settings", v1.6), on the
/// service thread:
///
/// - the robot gets `{"type":"settings","version":V,"doc":OBJ}` when it connects and desired is
///   newer than what it reported, on each change of desired, and again after it reported an
///   older version than desired;
/// - its `{"type":"settings_applied","version":V,"doc":OBJ}` is stored as reported (by the
///   database worker; one that could not be stored is tried again each second until a newer one
///   replaces it);
/// - connected apps get `{"type":"settings_changed","desired_version","reported_version"}` on
///   every stored change of either.
///
/// Every change is a notification from the store (migrations/0017) that reaches every node, so a
/// write on one node reaches the robot and the apps on any other. What a node keeps is the two
/// versions of the devices it follows (`ServedDevices`) that have settings: never a document,
/// which is read when the robot needs it.
final class RobotSettings {
    private let env: RelayEnvironment
    private let hub: DeviceHub
    private let worker: DatabaseWorker
    private let mailbox: Mailbox<ServiceEvent>
    /// The followed devices' versions (devices without settings have no entry).
    private var versions: [DeviceID: SettingsVersions] = [:]
    /// The desired version last handed (or being read) for a robot session of each device.
    private var offered: [DeviceID: (session: UInt64, version: Int64)] = [:]
    /// Reports the database did not take, the latest of each device, to store again.
    private var unstored: [DeviceID: AppliedSettings] = [:]
    private(set) var counts = (offered: 0, reported: 0, refused: 0)

    init(env: RelayEnvironment, hub: DeviceHub, worker: DatabaseWorker, mailbox: Mailbox<ServiceEvent>) {
        (self.env, self.hub, self.worker, self.mailbox) = (env, hub, worker, mailbox)
    }

    /// What the store holds of a device this node began to follow.
    func read(_ device: DeviceID, _ stored: SettingsVersions?) {
        versions[device] = stored
        offer(device)
    }

    /// The store says the device's settings changed (every node hears it).
    func changed(_ device: DeviceID, _ now: SettingsVersions) {
        let before = versions[device]
        versions[device] = now
        if before?.reported != now.reported { offered[device] = nil }  // desired goes again if still newer
        let notice = RelayMessages.settingsChanged(desired: now.desired > 0 ? now.desired : nil, reported: now.reported)
        for app in hub.apps(of: device) { hub.deliver(notice, to: app) }
        offer(device)
    }

    /// A socket of `device` attached or detached here: a robot that arrived gets what it lacks.
    func presenceChanged(_ device: DeviceID) {
        if hub.robot(of: device) == nil { offered[device] = nil }
        offer(device)
    }

    /// The device is no longer followed here.
    func forget(_ device: DeviceID) {
        versions[device] = nil
        offered[device] = nil
    }

    /// The robot's `settings_applied`; one that is not what the contract says is logged and dropped.
    func applied(_ device: DeviceID, _ frame: Payload) {
        let sealed = hub.sealedEpoch(of: device) != nil
        guard let report = frame.withBytes({ AppliedSettings(frame: $0, sealed: sealed) }) else {
            counts.refused += 1
            env.log.info("settings_applied_refused", metadata: ["device": "\(device.rawValue)",
                                                                "reason": "not {\"type\":\"settings_applied\",\"version\":N,\"doc\":{…}}"])
            return
        }
        store(device, report)
    }

    /// Once a second: reports the database did not take, again.
    func tick() {
        let waiting = unstored
        unstored = [:]
        for (device, report) in waiting { store(device, report) }
    }

    func handle(_ event: SettingsEvent) {
        switch event {
        case .desired(let device, let session, let desired):
            guard let robot = hub.robot(of: device), robot.id == session, let desired else { return }
            counts.offered += 1
            hub.deliver(RelayMessages.settings(version: desired.version, doc: desired.doc), to: robot)
        case .unstored(let device, let report):
            if (unstored[device]?.version ?? -1) <= report.version { unstored[device] = report }
        }
    }

    private func store(_ device: DeviceID, _ report: AppliedSettings) {
        let mailbox = self.mailbox
        counts.reported += 1
        let queued = worker.submit({ db in try SettingsRepository(db).report(device: device, version: report.version, doc: report.doc) },
                                   failed: { _ in mailbox.post(.settings(.unstored(device, report))) })
        if !queued { handle(.unstored(device, report)) }
    }

    /// Reads desired for the device's robot when it has yet to apply it and was not handed it.
    private func offer(_ device: DeviceID) {
        guard let current = versions[device], current.robotIsBehind, let robot = hub.robot(of: device) else { return }
        if let last = offered[device], last.session == robot.id, last.version >= current.desired { return }
        offered[device] = (robot.id, current.desired)
        let mailbox = self.mailbox, session = robot.id
        let queued = worker.submit({ db in
            mailbox.post(.settings(.desired(device, session: session, try SettingsRepository(db).settings(of: device).desired)))
        }, failed: { [log = env.log] error in
            log.warning("settings_unread", metadata: ["device": "\(device.rawValue)", "error": "\(error)"])
        })
        if !queued { offered[device] = nil }
    }
}

/// What the database worker tells `RobotSettings`.
enum SettingsEvent: Sendable {
    /// The desired document read for robot session `session` of the device (nil: none).
    case desired(DeviceID, session: UInt64, SettingsDocument?)
    /// A report the database did not take.
    case unstored(DeviceID, AppliedSettings)
}

/// A robot's `{"type":"settings_applied","version":V,"doc":OBJ}`, checked: `version` a whole
/// number from 0, `doc` a JSON object of at most `SettingsRules.maxDocumentBytes` — for a sealed
/// device a sealed frame of kind `settings` — kept as its exact text.
struct AppliedSettings: Sendable, Equatable {
    let version: Int64
    let doc: String

    init?(frame bytes: UnsafeBufferPointer<UInt8>, sealed: Bool) {
        guard let versionRange = Envelope.memberValue("version", in: bytes),
              let version = SettingsRules.version(UnsafeBufferPointer(rebasing: bytes[versionRange])),
              let docRange = Envelope.memberValue("doc", in: bytes) else { return nil }
        guard let document = try? SettingsRules.checked(document: Array(bytes[docRange]), sealedDevice: sealed) else { return nil }
        self.version = version
        doc = document.text
    }
}

extension RobotSettings: MetricsReporting {
    func report(to metrics: MetricsSink) {
        metrics.counter("wimz_settings_offered_total", "Desired settings documents handed to a robot on this node.", counts.offered)
        metrics.counter("wimz_settings_reports_total", "Robots' settings_applied frames sent to the store from this node (stored or ignored).",
                        counts.reported)
        metrics.counter("wimz_settings_reports_refused_total", "Robots' settings_applied frames that were malformed and dropped.",
                        counts.refused)
        metrics.gauge("wimz_settings_reports_unstored", "Robots' reports waiting for the database to store them.", unstored.count)
    }
}
