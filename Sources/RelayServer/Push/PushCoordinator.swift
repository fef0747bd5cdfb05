import Logging
import RelayCore
import RelayCrypto
import RelayPush
import RelayStore
import RelayWorkers

/// What the push sender and the database tell the service thread about pushes.
enum PushEvent: Sendable {
    case outcome(PushOutcome)
    /// Devices whose `robot_offline` this node claimed (exactly once in the cluster), with their
    /// registrations read in the same job (most are devices this node does not follow).
    case offlineClaimed([DeviceID: [PushRegistration]])
}

/// The phone in the pocket (docs/protocol.md v1.2 "Push notifications"), on the service thread: the
/// registrations of the devices this node follows (`ServedDevices`), the decision for each robot
/// event (local first, counted in windows), `robot_offline`, and the outcomes. The sending itself
/// is `APNsSender`'s, on its own threads; nothing here waits for it or for the database.
final class PushCoordinator {
    /// Nil without an APNs key: registrations are refused (501) and nothing is pushed.
    let sender: APNsSender?
    private let env: RelayEnvironment
    private let hub: DeviceHub
    private let authenticator: Authenticator
    private let database: DatabaseExchanges
    private let mailbox: Mailbox<ServiceEvent>
    private var planner: PushPlanner
    /// The registrations of each followed device (an empty list: it has none).
    private var registrations: [DeviceID: [PushRegistration]] = [:]
    /// Followed devices whose registrations are being read: their push-worthy events wait here,
    /// in order, at most `waitingEventsPerDevice` each (the read takes milliseconds; during a storm
    /// of token lookups up to 2 s, `DeviceReadSchedule`).
    private var reading: [DeviceID: [WaitingEvent]] = [:]
    private struct WaitingEvent {
        let kind: PushKind
        let payload: Payload
        let place: (epoch: String, seq: UInt64)
    }
    static let waitingEventsPerDevice = 64
    /// A `robot_offline` claim is in flight on the database worker (one at a time).
    private var claiming = false
    private var nextClaim: UInt64 = 0
    private var nextExpirySweep: UInt64 = 0

    // Counters for /metrics.
    /// Every kind and result from zero, so that /metrics has each series before the first push.
    private(set) var outcomes: [String: [PushOutcome.Result: Int]] = Dictionary(uniqueKeysWithValues: PushKind.allCases.map {
        ($0.rawValue, Dictionary(uniqueKeysWithValues: PushOutcome.Result.allCases.map { ($0, 0) }))
    })
    private(set) var registrationCount = 0

    /// `sender`: nil without an APNs key (push off).
    init(env: RelayEnvironment, hub: DeviceHub, authenticator: Authenticator, database: DatabaseExchanges,
         mailbox: Mailbox<ServiceEvent>, sender: APNsSender?) {
        self.env = env
        self.hub = hub
        self.authenticator = authenticator
        self.database = database
        self.mailbox = mailbox
        self.sender = sender
        planner = PushPlanner(interval: UInt64(env.configuration.pushIntervalSeconds * 1e9))
    }

    var isEnabled: Bool { sender != nil }

    // MARK: - The followed devices' registrations

    /// `device` is followed from now on; until its registrations are read its robot's events are
    /// watched and wait.
    func follow(_ device: DeviceID) {
        reading[device] = reading[device] ?? []
        if sender != nil { hub.setPushWatched(device, true) }
    }

    /// A followed device's registrations as the store has them now (read when it was followed, or
    /// again after a change): the events that waited for them are decided.
    func changed(_ device: DeviceID, _ now: [PushRegistration]) {
        let waiting = reading.removeValue(forKey: device)
        guard waiting != nil || registrations[device] != nil else { return }  // no longer followed
        let kept = Set(now.map(\.token))
        for gone in registrations[device] ?? [] where !kept.contains(gone.token) { planner.forget(token: gone.token, device: device) }
        registrationCount += now.count - (registrations[device]?.count ?? 0)
        registrations[device] = now
        hub.setPushWatched(device, sender != nil && !now.isEmpty)
        for event in waiting ?? [] { robotEvent(device, event.kind, event.payload, event.place) }
    }

    /// `device` is no longer followed: its registrations go (what the planner counted for them
    /// still goes out when its window closes).
    func forget(_ device: DeviceID) {
        reading[device] = nil
        registrationCount -= registrations.removeValue(forKey: device)?.count ?? 0
        hub.setPushWatched(device, false)
    }

    /// A registration this node just saved, held at once if its device is followed (the
    /// notification's re-read confirms it a few milliseconds later): an event right after the
    /// app's 200 is pushed.
    func saved(_ registration: PushRegistration) {
        guard let held = registrations[registration.device] else { return }
        changed(registration.device, held.filter { $0.token != registration.token } + [registration])
    }

    /// An app socket of `session`'s token is open now: it sees the stream; what was counted for
    /// its registrations goes (it can resume with `since=`).
    func appConnected(_ session: Session) {
        for registration in registrations[session.deviceID] ?? [] where registration.appTokenID == session.tokenID {
            planner.forget(token: registration.token, device: session.deviceID)
        }
    }

    // MARK: - Deciding

    /// A robot event the hub found push-worthy, as `kind` (the hub decides, a mission completed
    /// included).
    func robotEvent(_ device: DeviceID, _ kind: PushKind, _ payload: Payload, _ place: (epoch: String, seq: UInt64)) {
        guard sender != nil else { return }
        if let waiting = reading[device] {
            if waiting.count < Self.waitingEventsPerDevice { reading[device]?.append(WaitingEvent(kind: kind, payload: payload, place: place)) }
            return
        }
        guard let candidates = registrations[device], !candidates.isEmpty else { return }
        // A sealed frame (v1.5) is carried as it came, when it fits; its words are the app's to write.
        let sealed = payload.withBytes(Envelope.scan).kind == .sealed
        let sealedFrame = !sealed ? nil : payload.count <= PushMessage.sealedFrameLimit ? String(decoding: payload.bytes, as: UTF8.self) : ""
        let locArgs = sealed ? [] : Self.locArgs(kind, payload)
        let now = env.clock.monotonic()
        for registration in unseen(candidates, kind: kind) {
            let message = PushMessage(token: registration.token, environment: registration.environment, device: device, kind: kind,
                                      count: 1, epoch: place.epoch, seq: place.seq, locArgs: locArgs, sealedFrame: sealedFrame)
            if let push = planner.event(message, now: now) { send(push) }
        }
    }

    /// The registrations of `candidates` subscribed to `kind` whose app is not open on the
    /// device (local first) and whose app token still works: a registration goes with its token
    /// in the store (revoked, device disabled; expired, by the sweep below within a second), and a token
    /// this node holds is checked at once.
    private func unseen(_ candidates: [PushRegistration], kind: PushKind) -> [PushRegistration] {
        guard let device = candidates.first?.device else { return [] }
        let open = Set(hub.apps(of: device).map(\.tokenID))
        let wall = env.clock.wall()
        return candidates.filter { registration in
            guard registration.kinds.contains(kind), !open.contains(registration.appTokenID) else { return false }
            if let entry = authenticator.credentials.entry(id: registration.appTokenID),
               case .failure = CredentialRules.check(entry, at: wall) { return false }
            return true
        }
    }

    /// `loc-args`: the event data's fields for `kind`, a missing one as "", numbers as decimals,
    /// each at most 200 characters (the whole push must stay under APNs's 4 KiB).
    static func locArgs(_ kind: PushKind, _ payload: Payload) -> [String] {
        guard !kind.locArgFields.isEmpty else { return [] }
        let data = (try? JSONReader.parse(payload.bytes))?.member("data")
        return kind.locArgFields.map { field -> String in
            let text: String = switch data?.member(field) {
            case .string(let s)?: s
            case .int(let n)?: String(n)
            case .double(let d)?: d == d.rounded() && abs(d) < 1e15 ? String(Int64(d)) : String(d)
            case .bool(let b)?: String(b)
            default: ""
            }
            return String(text.prefix(200))
        }
    }

    private func send(_ push: PushMessage) {
        sender?.enqueue(push, now: env.clock.monotonic())
    }

    // MARK: - Time

    /// Once a second: windows that closed, `robot_offline` to claim, registrations and Live
    /// Activity tokens of expired app tokens to remove (one cheap statement; every node runs it, whichever is first removes).
    func tick(now: UInt64) {
        guard sender != nil else { return }
        for push in planner.expire(now: now) { send(push) }
        // Every node claims, whatever it follows: a robot whose node died is claimed by another.
        if now >= nextClaim, !claiming { claimOffline(now: now) }
        if now >= nextExpirySweep {
            nextExpirySweep = now + 1_000_000_000
            database.worker.submit({ db in
                try PushRepository(db).removeExpired()
                try LiveActivityRepository(db).removeExpired()
            }, failed: { _ in })
        }
    }

    /// Asks the store which devices' robots have been gone long enough and claims their
    /// `robot_offline` — atomically, so one node in the cluster sends each, even for a robot
    /// whose node died (its departure is recorded when its lease runs out).
    private func claimOffline(now: UInt64) {
        claiming = true
        nextClaim = now + 1_000_000_000
        let after = env.configuration.pushOfflineAfterSeconds
        let mailbox = self.mailbox
        let queued = database.worker.submit({ db in
            let repository = PushRepository(db)
            let claimed = try repository.claimRobotOffline(after: after)
            let registrations = Dictionary(grouping: try repository.registrations(devices: claimed), by: \.device)
            mailbox.post(.push(.offlineClaimed(registrations)))
        }, failed: { _ in mailbox.post(.push(.offlineClaimed([:]))) })
        if !queued { claiming = false }
    }

    func handle(_ event: PushEvent) {
        switch event {
        case .offlineClaimed(let claimed):
            claiming = false
            for (device, registrations) in claimed {
                for registration in unseen(registrations, kind: .robotOffline) {
                    send(PushMessage(token: registration.token, environment: registration.environment, device: device,
                                     kind: .robotOffline, count: 1))
                }
            }
        case .outcome(let outcome):
            outcomes[outcome.message.kind.rawValue, default: [:]][outcome.result, default: 0] += 1
            if outcome.result != .queueFull {
                env.metrics.pushSeconds.record(outcome.latency)
            }
            if outcome.result == .unregistered {
                let message = outcome.message
                planner.forget(token: message.token, device: message.device)
                database.worker.submit({ db in
                    try PushRepository(db).remove(device: message.device, token: message.token, appTokenID: nil, reason: "unregistered")
                }, failed: { _ in })
            }
        }
    }

    /// The relay is stopping: every count still waiting goes out now, then the sender finishes
    /// what is queued (for at most `seconds`).
    func stop(within seconds: Double) {
        guard let sender else { return }
        for push in planner.flush() { send(push) }
        sender.shutdown(within: seconds)
    }

    /// SIGHUP: the key file again.
    func reloadKey() {
        guard let sender else { return }
        do {
            try sender.reloadKey()
            env.log.info("apns_key_reloaded")
        } catch {
            env.log.error("apns_key_reload_failed", metadata: ["reason": "\(error)"])
        }
    }
}

extension PushCoordinator: MetricsReporting {
    func report(to metrics: MetricsSink) {
        for (kind, results) in outcomes {
            for (result, n) in results {
                metrics.counter("wimz_pushes_total",
                                "Pushes by kind and what became of them (delivered, unregistered, rejected, expired, queue_full, provider_auth).",
                                [("kind", kind), ("result", result.rawValue)], n)
            }
        }
        metrics.gauge("wimz_push_queue_depth", "Pushes waiting for the APNs sender.", sender?.queueDepth ?? 0)
        metrics.gauge("wimz_push_registrations", "Push registrations this node holds (of the devices it follows).", registrationCount)
        metrics.gauge("wimz_push_enabled", "1 when an APNs key is configured.", isEnabled ? 1 : 0)
    }
}
