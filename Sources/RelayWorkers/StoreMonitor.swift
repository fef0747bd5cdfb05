import RelayCore
import RelayStore

#if canImport(Glibc)
import Glibc
#endif

/// The store's state as the relay sees it (feeds `/readyz` and the token checks).
public struct StoreHealth: Sendable, Equatable {
    public enum State: String, Sendable {
        /// Connected and every migration applied.
        case ready
        /// Connected, but migrations are pending (run `wimz-relay migrate`).
        case schemaOutdated = "schema_outdated"
        /// Not reachable.
        case unavailable
    }

    public var state: State
    public var reason: String

    public init(state: State, reason: String) {
        self.state = state
        self.reason = reason
    }
}

/// What the monitor reports to its owner (the relay's service thread, through its mailbox).
public enum StoreEvent: Sendable {
    case health(StoreHealth)
    /// The monitor (re)connected with the schema current: notifications may have been missed
    /// while it was away, so the tokens the relay holds are to be read again
    /// (`CredentialQueue.recheck`), and tokens it found unknown may exist now.
    case credentialsMayBeStale
    /// The answer to `CredentialQueue.lookUp`: the tokens found among those digests (a digest
    /// without an entry is no token's).
    case credentialsFound(digests: [[UInt8]], entries: [CredentialEntry])
    /// The answer to `CredentialQueue.recheck`: those tokens as they are now (an id without an
    /// entry was deleted).
    case credentialsRechecked(ids: [Int64], entries: [CredentialEntry])
    /// A token was issued or changed (revoked, …): its current row (nil if deleted).
    case tokenChanged(id: Int64, entry: CredentialEntry?)
    /// A device was disabled or enabled.
    case deviceChanged(DeviceID, disabled: Bool)
    /// The TURN secrets of the relay's realm, newest (signing) first.
    case turnSecrets([TurnSecret])
    /// The answer to `FollowedDevices.follow`: what the store holds for those devices (each one
    /// asked is answered, an unknown device with nothing).
    case devicesRead([DeviceRegistrations])
    /// One followed device's push registrations, as they are now.
    case pushChanged(DeviceID, [PushRegistration])
    /// One followed device's Live Activity tokens, as they are now.
    case liveActivityChanged(DeviceID, [LiveActivityRegistration])
    /// The device's mission run ended (on whichever node ended it).
    case runEnded(DeviceID)
    /// The robot stored a new epoch of the sealed device (v1.5).
    case sealedEpoch(DeviceID, epoch: Int)
    /// An owner's signed roster for a followed device's robot (v1.5), as sent.
    case rosterProposed(DeviceID, signed: String)
    /// A followed device's settings changed (v1.6): its versions now.
    case settingsChanged(DeviceID, SettingsVersions)
    /// A followed device's timeline has new entries (v1.6).
    case timelineStored(DeviceID, newest: Int64, newestForGuests: Int64?)
}

/// A database thread that checks reachability and schema every second, answers the relay's
/// token lookups (`CredentialQueue`) and device reads (`FollowedDevices`) in batches — lookups
/// first: they hold handshakes, a device's read holds nothing (`DeviceReadSchedule`) — and turns
/// `wimz_credentials` notifications into `StoreEvent`s. Lookups and notifications share its one
/// connection, so their answers reach the relay in the order the database committed them: a
/// lookup never overtakes a revocation, nor a device's read a change of its registrations. The
/// relay's service thread never waits on it.
public final class StoreMonitor: DatabaseWork {
    private let migrator: Migrator
    private let turnRealm: String
    private let onEvent: @Sendable (StoreEvent) -> Void
    private let credentials: CredentialQueue
    private let devices: FollowedDevices
    private let thread: DatabaseThread
    /// Thread-confined state (the monitor's own thread), locked only to satisfy `Sendable`.
    private let schedule: Locked<DeviceReadSchedule>
    private let state = Locked<(lastHealth: StoreHealth?, caughtUp: Bool, statusCheckedAt: UInt64?, statusChecks: Int,
                                lookupStatements: Int)>((nil, false, nil, 0, 0))
    /// How often the schema is checked (its two queries used to run on every wake, i.e. for every
    /// notification: ~2 transactions per node for each token or push registration change).
    static let statusInterval: UInt64 = 1_000_000_000

    /// Statements of one lookup at most this many tokens (a storm's queue is read in several).
    static let lookupChunk = 1000

    public init(conninfo: String, node: String? = nil, migrator: Migrator, turnRealm: String, credentials: CredentialQueue,
                devices: FollowedDevices = FollowedDevices(), deviceReads: DeviceReadSchedule = DeviceReadSchedule(),
                onEvent: @escaping @Sendable (StoreEvent) -> Void) {
        schedule = Locked(deviceReads)
        self.migrator = migrator
        self.turnRealm = turnRealm
        self.onEvent = onEvent
        self.credentials = credentials
        self.devices = devices
        let thread = DatabaseThread(name: "store_monitor", conninfo: conninfo, node: node)
        self.thread = thread
        credentials.whenQueued { thread.wake() }
        devices.whenQueued { thread.wake() }
    }

    public func start() { thread.start(self) }

    /// Stops the thread and joins it.
    public func stop() { thread.stop() }

    // MARK: DatabaseWork

    public var channels: [String] { [StoreNotification.credentialsChannel] }

    public func connected(_ db: PGConnection) throws {
        state.withLock {
            $0.caughtUp = false
            $0.statusCheckedAt = nil
        }
    }

    public func step(_ db: PGConnection, on thread: DatabaseThread) throws {
        try checkSchema(db)
        let current = state.withLock { $0.caughtUp }
        if current {
            if !credentials.isEmpty {
                // A lone lookup waits 2 ms for company: in a storm of handshakes that makes batches
                // of many (one statement each), and a single handshake hardly notices.
                if credentials.waitingDigests < 64 { usleep(2_000) }
                let answered = try answerCredentials(db)
                schedule.withLock { $0.lookedUp(answered, at: MonotonicClock.nanoseconds()) }
            }
            if devicesDue {
                if devices.waiting < 64 { usleep(2_000) }  // company, as for lookups
                try readDevices(db)
            }
        }
        let notes = try thread.notifications(on: db, waitingUpTo: current ? longestWait : 1000)
        guard current else { return }  // catching up later reads what these changed
        for note in notes {
            switch StoreNotification(note) {
            case .token(let id)?:
                onEvent(.tokenChanged(id: id, entry: try TokenRepository(db).credential(id: id)))
            case .device(let id)?:
                if let device = try DeviceRepository(db).get(id) { onEvent(.deviceChanged(id, disabled: device.isDisabled)) }
            case .turnSecret(let realm)? where realm == turnRealm:
                onEvent(.turnSecrets(try TurnRepository(db).secrets(realm: turnRealm)))
            case .push(let device)? where devices.isFollowed(device):
                onEvent(.pushChanged(device, try PushRepository(db).registrations(device: device)))
            case .liveActivity(let device)? where devices.isFollowed(device):
                onEvent(.liveActivityChanged(device, try LiveActivityRepository(db).registrations(device: device)))
            case .runEnded(let device)?:
                onEvent(.runEnded(device))
            case .sealedEpoch(let device, let epoch)?:
                onEvent(.sealedEpoch(device, epoch: epoch))
            case .rosterProposed(let device, let id)? where devices.isFollowed(device):
                if let signed = try SealedRepository(db).proposedRoster(id: id) { onEvent(.rosterProposed(device, signed: signed)) }
            case .settings(let device, let versions)? where devices.isFollowed(device):
                onEvent(.settingsChanged(device, versions))
            case .timeline(let device, let newest, let guests)? where devices.isFollowed(device):
                onEvent(.timelineStored(device, newest: newest, newestForGuests: guests))
            default:
                continue
            }
        }
    }

    /// The schema's state, at most once a second (and at once after a connect): when current,
    /// the relay catches up (tokens, TURN secrets, followed devices) if it has not since the connect.
    private func checkSchema(_ db: PGConnection) throws {
        let now = MonotonicClock.nanoseconds()
        if let checked = state.withLock({ $0.statusCheckedAt }), now - checked < StoreMonitor.statusInterval { return }
        let status = try migrator.status(db)
        state.withLock {
            $0.statusCheckedAt = now
            $0.statusChecks += 1
        }
        if status.isCurrent {
            if !state.withLock({ $0.caughtUp }) {
                onEvent(.credentialsMayBeStale)
                onEvent(.turnSecrets(try TurnRepository(db).secrets(realm: turnRealm)))
                devices.readAllAgain()
                state.withLock { $0.caughtUp = true }
            }
            report(StoreHealth(state: .ready, reason: "ok"))
        } else {
            report(StoreHealth(state: .schemaOutdated,
                               reason: "pending migrations: \(status.pending.map(String.init).joined(separator: ","))"))
        }
    }

    /// Answers what the relay asked about tokens (one statement a thousand); returns how many
    /// presented tokens it answered.
    private func answerCredentials(_ db: PGConnection) throws -> Int {
        guard !credentials.isEmpty else { return 0 }
        let batch = credentials.take()
        do {
            for digests in StoreMonitor.chunks(batch.digests) {
                let entries = try TokenRepository(db).credentials(digests: Array(digests))
                state.withLock { $0.lookupStatements += 1 }
                onEvent(.credentialsFound(digests: Array(digests), entries: entries))
            }
            if let ids = batch.recheck {
                let entries = try StoreMonitor.chunks(ids).flatMap { try TokenRepository(db).credentials(ids: Array($0)) }
                onEvent(.credentialsRechecked(ids: ids, entries: entries))
            }
        } catch {
            credentials.putBack(batch)  // asked again after the reconnect
            throw error
        }
        return batch.digests.count
    }

    /// Reads devices the relay began to follow (at most `DeviceReadSchedule.chunk`; the rest in
    /// the steps after): their registrations, Live Activity tokens and open runs, three
    /// statements in one transaction.
    private func readDevices(_ db: PGConnection) throws {
        let asked = devices.take(upTo: DeviceReadSchedule.chunk)
        guard !asked.isEmpty else { return }
        do {
            try db.transaction {
                let push = try PushRepository(db).registrations(devices: asked)
                let live = try LiveActivityRepository(db).registrations(devices: asked)
                let runs = try MissionRunRepository(db).runs(of: asked)
                let pushed = Dictionary(grouping: push, by: \.device), lived = Dictionary(grouping: live, by: \.device)
                onEvent(.devicesRead(asked.map { device in
                    DeviceRegistrations(device: device, push: pushed[device] ?? [], liveActivities: lived[device] ?? [],
                                        run: runs[device]?.run, name: runs[device]?.name ?? "", sealedEpoch: runs[device]?.sealedEpoch,
                                        settings: runs[device]?.settings)
                }))
            }
        } catch {
            devices.putBack(asked)  // read again after the reconnect
            throw error
        }
    }

    private static func chunks<T>(_ items: [T]) -> [ArraySlice<T>] {
        stride(from: 0, to: items.count, by: lookupChunk).map { items[$0..<min($0 + lookupChunk, items.count)] }
    }

    /// Whether the devices that arrived are to be read now (`DeviceReadSchedule`).
    private var devicesDue: Bool {
        let queued = devices.oldestQueuedAt
        return schedule.withLock { $0.isDue(oldestQueuedAt: queued, now: MonotonicClock.nanoseconds()) }
    }

    /// How long a caught-up monitor may wait for notifications (ms): not at all while lookups are
    /// queued, until the devices queued are due, else a second (the schema's check).
    private var longestWait: Int32 {
        guard credentials.isEmpty else { return 0 }
        let queued = devices.oldestQueuedAt
        return min(1000, schedule.withLock { $0.millisecondsUntilDue(oldestQueuedAt: queued, now: MonotonicClock.nanoseconds()) } ?? 1000)
    }

    /// How many times the schema was read (`wimz_store_schema_checks_total`).
    public var statusChecks: Int { state.withLock { $0.statusChecks } }

    /// How many statements read presented tokens (`wimz_credential_lookup_statements_total`).
    public var lookupStatements: Int { state.withLock { $0.lookupStatements } }

    public func unavailable(_ error: Error) {
        report(StoreHealth(state: .unavailable, reason: "\(error)"))
    }

    public func finish(_ db: PGConnection?) {}

    private func report(_ health: StoreHealth) {
        let changed = state.withLock { s -> Bool in
            defer { s.lastHealth = health }
            return s.lastHealth != health
        }
        if changed { onEvent(.health(health)) }
    }
}
