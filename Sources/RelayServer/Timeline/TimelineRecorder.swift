import Foundation
import RelayCore
import RelayStore
import RelayWorkers

/// The household's timeline on the service thread (docs/protocol.md "The household's timeline", v1.6):
///
/// - what the hub hands over (the robot's kept frames, as they came) and the relay's own entries
///   (`robot_offline` once a robot has been gone 30 s, `robot_online` when it is back after one,
///   or at its device's first connect) wait here in the order they were received, and go to the
///   store in batches every 100 ms on the database worker — never on the forwarding path; a
///   batch the database did not take is written again first (bounded: past `maxWaiting` the
///   oldest are dropped and counted);
/// - apps hear `{"type":"timeline","newest":ID}` once entries are stored, at most once a second a
///   device, a guest the newest it may see (none when it may see none of them);
/// - at stop, what waits is stored if the database answers, else appended to a spool file
///   (`timeline-spool.jsonl` in `WIMZ_SPOOL_DIR`, JSON lines) that the next start stores first:
///   an entry the relay received survives a database outage and a SIGTERM, as audit events do.
final class TimelineRecorder {
    /// A robot gone this long has a `robot_offline` entry (nanoseconds).
    static let offlineAfter: UInt64 = 30_000_000_000
    /// A device's notices are at least this far apart (nanoseconds).
    static let noticeInterval: UInt64 = 1_000_000_000
    /// After a batch the database did not take, the next waits this long (nanoseconds) rather
    /// than press a database that is down.
    static let retryDelay: UInt64 = 1_000_000_000
    static let batchLimit = 1_000
    static let maxWaiting = 100_000

    private let env: RelayEnvironment
    private let hub: DeviceHub
    private let worker: DatabaseWorker
    private let mailbox: Mailbox<ServiceEvent>
    private var waiting: [WaitingEntry] = []
    private var writing = 0
    /// Batches the database did not take, until the service thread takes them back (or the stop
    /// does): filled on the worker's thread.
    private let unwritten = Locked<[[WaitingEntry]]>([])
    private let spoolPath: String
    /// Entries read back from the spool at start and not yet stored (the file goes once they are).
    private var replaying = 0
    /// How many of `waiting`'s first entries an earlier attempt may have stored (a batch whose
    /// commit's answer was lost, the spool): their batches leave out what is already there.
    private var uncertain = 0
    /// When the next batch may go after one the database did not take (monotonic ns).
    private var retryAt: UInt64 = 0
    /// Devices whose robot is on this node.
    private var robotsHere: Set<DeviceID> = []
    /// Robots that left this node: when, and when their absence becomes an entry.
    private var gone: [DeviceID: (leftAt: UnixTime, due: UInt64)] = [:]
    /// Notices: each device's, and the devices whose notice the interval holds back.
    private var notices: [DeviceID: DeviceNotices] = [:]
    private var held: [DeviceID] = []
    private(set) var counts = (received: 0, written: 0, batches: 0, failed: 0, dropped: 0, notices: 0, spooled: 0, readBack: 0, malformed: 0)

    init(env: RelayEnvironment, hub: DeviceHub, worker: DatabaseWorker, mailbox: Mailbox<ServiceEvent>) {
        (self.env, self.hub, self.worker, self.mailbox) = (env, hub, worker, mailbox)
        spoolPath = (env.configuration.spoolDirectory as NSString).appendingPathComponent("timeline-spool.jsonl")
        waiting = readSpool().map(WaitingEntry.spooled)
        replaying = waiting.count
        uncertain = replaying
        counts.readBack = replaying
    }

    /// A robot frame the timeline keeps, under `name`.
    func robotFrame(_ device: DeviceID, name: String, _ frame: Payload) {
        record(.robotFrame(device, at: env.clock.wall(), name: name, frame))
    }

    /// A socket of `device` attached or detached here (`robotLeftAt`: its robot went offline then).
    func presenceChanged(_ device: DeviceID, robotLeftAt: UnixTime?) {
        if let robotLeftAt {
            robotsHere.remove(device)
            gone[device] = (robotLeftAt, env.clock.monotonic() + Self.offlineAfter)
            return
        }
        guard hub.robot(of: device) != nil, robotsHere.insert(device).inserted else { return }
        gone[device] = nil
        let since = hub.status(of: device).since
        record(.relayEvent(device, at: env.clock.wall(), name: "robot_online", data: [("since", .string(since.iso8601Milliseconds))], condition: .robotBack))
    }

    /// Every 100 ms: robots gone long enough, held notices now due, and the next batch.
    func tick(now: UInt64) {
        for (device, left) in gone where left.due <= now {
            gone[device] = nil
            guard hub.robot(of: device) == nil else { continue }
            record(.relayEvent(device, at: left.leftAt.adding(seconds: Int64(Self.offlineAfter / 1_000_000_000)), name: "robot_offline",
                               data: [("since", .string(left.leftAt.iso8601Milliseconds))], condition: .robotGone(since: left.leftAt)))
        }
        held.removeAll { device in
            switch notices[device]?.takeHeld(now: now) {
            case .notYet: return false
            case .due(let newest, let forGuests): announce(device, newest: newest, forGuests: forGuests)
            case .none, .nothingHeld: break
            }
            return true
        }
        flush()
    }

    /// The store says entries of `device` were stored (every node hears it).
    func stored(_ device: DeviceID, newest: Int64, forGuests: Int64?) {
        // One lookup of the device: a batch stores entries of many.
        switch notices[device, default: DeviceNotices()].stored(newest: newest, forGuests: forGuests, now: env.clock.monotonic()) {
        case .send(let newest, let forGuests): announce(device, newest: newest, forGuests: forGuests)
        case .heldFirst: held.append(device)
        case .heldAgain: break
        }
    }

    func handle(_ event: TimelineEvent) {
        writing -= 1
        switch event {
        case .written(let count, let malformed):
            counts.written += count - malformed
            counts.malformed += malformed
            counts.batches += 1
            if replaying > 0 {
                replaying -= count
                if replaying <= 0 { try? FileManager.default.removeItem(atPath: spoolPath) }
            }
        case .unwritten:
            counts.failed += 1
            let batches = unwritten.withLock { taken in defer { taken = [] }; return taken }
            let failed = batches.flatMap { $0 }
            waiting = failed + waiting  // first again, in the order received
            uncertain += failed.count
            retryAt = env.clock.monotonic() + Self.retryDelay
            let excess = waiting.count - Self.maxWaiting
            if excess > 0 {
                counts.dropped += excess
                waiting.removeFirst(excess)
                uncertain = max(0, uncertain - excess)
                env.log.error("timeline_entries_dropped", metadata: ["entries": .stringConvertible(excess)])
            }
        }
    }

    /// Sends what waits, one batch at a time (in order: the next only once the last is done).
    func flush() {
        guard writing == 0, !waiting.isEmpty, env.clock.monotonic() >= retryAt else { return }
        let batch = Array(waiting.prefix(Self.batchLimit))
        waiting.removeFirst(batch.count)
        let mayBeStored = uncertain > 0
        uncertain = max(0, uncertain - batch.count)
        let mailbox = self.mailbox
        writing += 1
        let unwritten = self.unwritten
        let queued = worker.submit({ db in
            let (entries, malformed) = Self.embeddable(batch)
            try TimelineRepository(db).append(entries, mayBeStored: mayBeStored)
            mailbox.post(.timeline(.written(batch.count, malformed: malformed)))
        }, failed: { _ in
            unwritten.withLock { $0.append(batch) }
            mailbox.post(.timeline(.unwritten))
        })
        if !queued {
            unwritten.withLock { $0.append(batch) }
            handle(.unwritten)
        }
    }

    /// `entries` as the store takes them, without the robot frames a page could not embed as
    /// sent — not one JSON object (the forwarding path reads only a frame's envelope, so a
    /// cut-off frame gets this far) — and how many those were. Run on the database worker: off
    /// the forwarding path.
    private static func embeddable(_ entries: [WaitingEntry]) -> ([TimelineRepository.NewEntry], malformed: Int) {
        let valid = entries.map(\.entry).filter { entry in
            guard entry.source == .robot else { return true }
            if case .object? = try? JSONReader.parse(Array(entry.message.utf8)) { return true }
            return false
        }
        return (valid, entries.count - valid.count)
    }

    /// At stop (the service thread done, the worker still running): what waits — and a batch the
    /// database just refused — is stored now if it answers, else spooled for the next start.
    func stop() {
        _ = try? worker.perform { _ in () }  // a barrier: the batch in flight is stored, or back in `unwritten`
        let failed = unwritten.withLock { taken in defer { taken = [] }; return taken }.flatMap { $0 }
        let pending = failed + waiting, mayBeStored = !failed.isEmpty || uncertain > 0
        waiting = []
        guard !pending.isEmpty else { return }
        do {
            let (entries, malformed) = Self.embeddable(pending)
            try worker.perform { db in _ = try TimelineRepository(db).append(entries, mayBeStored: mayBeStored) }
            counts.written += entries.count
            counts.malformed += malformed
            if replaying > 0 { try? FileManager.default.removeItem(atPath: spoolPath) }
        } catch {
            spool(pending.map(\.entry))
        }
    }

    private func spool(_ entries: [TimelineRepository.NewEntry]) {
        let encoder = JSONEncoder()
        let lines = entries.compactMap { try? encoder.encode($0) }.map { String(decoding: $0, as: UTF8.self) + "\n" }.joined()
        try? FileManager.default.createDirectory(atPath: env.configuration.spoolDirectory, withIntermediateDirectories: true)
        guard let handle = FileHandle(forWritingAtPath: spoolPath) ?? {
            _ = FileManager.default.createFile(atPath: spoolPath, contents: nil, attributes: [.posixPermissions: 0o600])
            return FileHandle(forWritingAtPath: spoolPath)
        }() else {
            env.log.error("timeline_spool_failed", metadata: ["path": "\(spoolPath)", "entries": .stringConvertible(entries.count)])
            return
        }
        handle.seekToEndOfFile()
        handle.write(Data(lines.utf8))
        try? handle.synchronize()
        try? handle.close()
        counts.spooled += entries.count
        env.log.warning("timeline_spooled", metadata: ["path": "\(spoolPath)", "entries": .stringConvertible(entries.count)])
    }

    /// What an earlier run spooled, oldest first (a damaged line is skipped and logged).
    private func readSpool() -> [TimelineRepository.NewEntry] {
        guard let text = try? String(contentsOfFile: spoolPath, encoding: .utf8) else { return [] }
        let decoder = JSONDecoder()
        var skipped = 0
        let entries = text.split(separator: "\n").compactMap { line -> TimelineRepository.NewEntry? in
            guard let entry = try? decoder.decode(TimelineRepository.NewEntry.self, from: Data(line.utf8)) else {
                skipped += 1
                return nil
            }
            return entry
        }
        env.log.info("timeline_spool_read", metadata: ["entries": .stringConvertible(entries.count), "skipped": .stringConvertible(skipped)])
        return entries
    }

    private func record(_ entry: WaitingEntry) {
        counts.received += 1
        waiting.append(entry)
    }

    private func announce(_ device: DeviceID, newest: Int64, forGuests: Int64?) {
        let all = RelayMessages.timeline(newest: TimelineID(device: device, number: newest).text)
        let guests = forGuests.map { RelayMessages.timeline(newest: TimelineID(device: device, number: $0).text) }
        for app in hub.apps(of: device) {
            guard let notice = app.rights.access == .guest ? guests : all else { continue }
            counts.notices += 1
            hub.deliver(notice, to: app)
        }
    }

    /// A mission run (v1.4) ended: `mission_run` with when it began and ended and its last state
    /// (not for a sealed device: its runs are the robot's sealed frames).
    func missionRun(_ device: DeviceID, began: UnixTime, state: JSONValue) {
        guard hub.sealedEpoch(of: device) == nil else { return }
        let now = env.clock.wall()
        record(.relayEvent(device, at: now, name: "mission_run",
                           data: [("began", .string(began.iso8601Milliseconds)), ("ended", .string(now.iso8601Milliseconds)), ("state", state)]))
    }
}

/// An entry waiting on the service thread: one read back from the spool, a robot's kept frame as
/// it came, or the relay's own event — their text made on the database worker (the service
/// thread only holds on to the payload, or the event's members).
enum WaitingEntry: Sendable {
    case spooled(TimelineRepository.NewEntry)
    case robotFrame(DeviceID, at: UnixTime, name: String, Payload)
    /// `{"type":"event","event":NAME,"data":{…}}`.
    case relayEvent(DeviceID, at: UnixTime, name: String, data: [(String, JSONValue)], condition: TimelineRepository.NewEntry.Condition = .always)

    /// The entry as the store takes it.
    var entry: TimelineRepository.NewEntry {
        switch self {
        case .spooled(let entry): entry
        case .robotFrame(let device, let at, let name, let frame):
            .init(device: device, at: at, source: .robot, event: name, message: frame.withBytes { String(decoding: $0, as: UTF8.self) })
        case .relayEvent(let device, let at, let name, let data, let condition):
            .init(device: device, at: at, source: .relay, event: name,
                  message: JSONValue.object([("type", "event"), ("event", .string(name)), ("data", .object(data))]).encoded, condition: condition)
        }
    }
}

/// A device's notices: when the last went out, and the one the interval holds back.
struct DeviceNotices {
    enum Outcome { case send(newest: Int64, forGuests: Int64?), heldFirst, heldAgain }
    enum Held { case notYet, due(newest: Int64, forGuests: Int64?), nothingHeld }
    private var sentAt: UInt64?
    private var held: (newest: Int64, forGuests: Int64?)?

    /// Entries were stored: a notice goes now (with what was held: nothing older follows it), or
    /// waits for the interval (the newest kept).
    mutating func stored(newest: Int64, forGuests: Int64?, now: UInt64) -> Outcome {
        let merged = (newest: max(newest, held?.newest ?? newest), forGuests: Self.later(forGuests, held?.forGuests))
        guard let sentAt, sentAt + TimelineRecorder.noticeInterval > now else {
            (self.sentAt, held) = (now, nil)
            return .send(newest: merged.newest, forGuests: merged.forGuests)
        }
        defer { held = merged }
        return held == nil ? .heldFirst : .heldAgain
    }

    /// The held notice once the interval allows it (then counted as sent).
    mutating func takeHeld(now: UInt64) -> Held {
        guard let due = held else { return .nothingHeld }
        guard (sentAt ?? 0) + TimelineRecorder.noticeInterval <= now else { return .notYet }
        (held, sentAt) = (nil, now)
        return .due(newest: due.newest, forGuests: due.forGuests)
    }

    private static func later(_ a: Int64?, _ b: Int64?) -> Int64? {
        switch (a, b) {
        case let (a?, b?): max(a, b)
        case let (a, b): a ?? b
        }
    }
}

/// What the database worker tells `TimelineRecorder`.
enum TimelineEvent: Sendable {
    /// A batch of this many entries stored, less `malformed` left out.
    case written(Int, malformed: Int)
    /// A batch the database did not take (in `TimelineRecorder.unwritten`), to write again.
    case unwritten
}

extension TimelineRecorder: MetricsReporting {
    func report(to metrics: MetricsSink) {
        metrics.counter("wimz_timeline_entries_received_total", "Timeline entries received on this node (the robot's kept frames and the relay's own).",
                        counts.received)
        metrics.counter("wimz_timeline_entries_written_total", "Timeline entries this node stored.", counts.written)
        metrics.counter("wimz_timeline_batches_total", "Timeline batches this node stored (one transaction each).", counts.batches)
        metrics.counter("wimz_timeline_batches_failed_total", "Timeline batches the database did not take (written again).", counts.failed)
        metrics.counter("wimz_timeline_entries_dropped_total", "Timeline entries dropped: more than 100,000 waited for the database.",
                        counts.dropped)
        metrics.gauge("wimz_timeline_entries_waiting", "Timeline entries waiting to be stored.", waiting.count)
        metrics.counter("wimz_timeline_entries_malformed_total", "Robot frames the timeline left out: not one JSON object (a page embeds each as it was sent).",
                        counts.malformed)
        metrics.counter("wimz_timeline_notices_total", "Timeline notices sent to apps on this node.", counts.notices)
        metrics.counter("wimz_timeline_entries_spooled_total", "Timeline entries written to the spool file at stop (the database did not answer).",
                        counts.spooled)
        metrics.counter("wimz_timeline_spool_entries_read_total", "Timeline entries this run read back from an earlier run's spool file at start.",
                        counts.readBack)
    }
}
