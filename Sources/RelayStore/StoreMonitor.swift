import RelayCore

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
    /// Every token that can authenticate right now; replaces whatever the relay had.
    case credentialSnapshot([CredentialEntry])
    /// A token was issued or changed (revoked, …): its current row (nil if deleted).
    case tokenChanged(id: Int64, entry: CredentialEntry?)
    /// A device was disabled or enabled.
    case deviceChanged(DeviceID, disabled: Bool)
    /// The TURN secrets of the relay's realm, newest (signing) first.
    case turnSecrets([TurnSecret])
}

/// A thread that keeps one connection to PostgreSQL: it checks reachability and schema every
/// second, loads the credential snapshot on every (re)connect, and turns `wimz_credentials`
/// notifications into `StoreEvent`s. The relay's service thread never waits on it.
public final class StoreMonitor: Sendable {
    public static let channel = "wimz_credentials"

    private let conninfo: String
    private let migrator: Migrator
    private let turnRealm: String
    private let onEvent: @Sendable (StoreEvent) -> Void
    private let thread = WakeableThread()

    public init(conninfo: String, migrator: Migrator, turnRealm: String = "wimz",
                onEvent: @escaping @Sendable (StoreEvent) -> Void) {
        self.conninfo = conninfo
        self.migrator = migrator
        self.turnRealm = turnRealm
        self.onEvent = onEvent
    }

    public func start() {
        thread.start { [self] in run() }
    }

    /// Stops the thread and waits for it.
    public func stop() {
        thread.stop()
    }

    private var isRunning: Bool { thread.isRunning }

    private func run() {
        var lastHealth: StoreHealth?
        func report(_ health: StoreHealth) {
            if health != lastHealth { onEvent(.health(health)) }
            lastHealth = health
        }
        while isRunning {
            let db: PGConnection
            do {
                db = try PGConnection(conninfo: conninfo, connectTimeout: 2)
                try db.execute("LISTEN \(StoreMonitor.channel)")
            } catch {
                report(StoreHealth(state: .unavailable, reason: "\(error)"))
                wait(milliseconds: 1000)
                continue
            }
            var snapshotLoaded = false
            while isRunning {
                do {
                    let status = try migrator.status(db)
                    if status.isCurrent {
                        if !snapshotLoaded {
                            onEvent(.credentialSnapshot(try TokenRepository(db).activeCredentials()))
                            onEvent(.turnSecrets(try TurnRepository(db).secrets(realm: turnRealm)))
                            snapshotLoaded = true
                        }
                        report(StoreHealth(state: .ready, reason: "ok"))
                    } else {
                        report(StoreHealth(state: .schemaOutdated,
                                           reason: "pending migrations: \(status.pending.map(String.init).joined(separator: ","))"))
                    }
                    try waitForNotifications(db, milliseconds: 1000, snapshotLoaded: snapshotLoaded)
                } catch {
                    report(StoreHealth(state: .unavailable, reason: "\(error)"))
                    break
                }
            }
        }
    }

    /// Waits up to `milliseconds` for notifications and forwards the rows they name.
    private func waitForNotifications(_ db: PGConnection, milliseconds: Int32, snapshotLoaded: Bool) throws {
        thread.wait(socket: db.socket, milliseconds: milliseconds)
        guard isRunning else { return }
        let notes = try db.drainNotifications()
        guard snapshotLoaded else { return }  // the snapshot taken later includes these changes
        let tokens = TokenRepository(db)
        for note in notes where note.channel == StoreMonitor.channel {
            let parts = note.payload.split(separator: ":", maxSplits: 1)
            guard parts.count == 2 else { continue }
            switch parts[0] {
            case "token":
                if let id = Int64(parts[1]) { onEvent(.tokenChanged(id: id, entry: try tokens.credential(id: id))) }
            case "device":
                if let id = DeviceID(String(parts[1])), let device = try DeviceRepository(db).get(id) {
                    onEvent(.deviceChanged(id, disabled: device.isDisabled))
                }
            case "turn_secret" where parts[1] == turnRealm:
                onEvent(.turnSecrets(try TurnRepository(db).secrets(realm: turnRealm)))
            default:
                continue
            }
        }
    }

    private func wait(milliseconds: Int32) { thread.wait(milliseconds: milliseconds) }
}
