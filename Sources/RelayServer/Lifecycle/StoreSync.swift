import Logging
import RelayCore
import RelayWorkers
import Synchronization

/// Applies what the store monitor reports: the store's health (for `/readyz` and systemd's
/// READY=1), the token cache (lookups, changes and rechecks, closing what was revoked), device
/// disabling, the TURN secrets, and the followed devices' push registrations, Live Activity tokens
/// and runs.
final class StoreSync {
    /// Latest store state, as reported by the monitor.
    private(set) var health = StoreHealth(state: .unavailable, reason: "not checked yet")
    /// Called once, the first time the store is ready (systemd READY=1).
    private let onReady: () -> Void
    private var announcedReady = false
    private let env: RelayEnvironment
    private let hub: DeviceHub
    private let authenticator: Authenticator
    private let turn: TurnEndpoint
    private let webSocket: WebSocketEndpoint
    private let push: PushCoordinator
    private let missionRuns: MissionRuns
    private let served: ServedDevices
    private let settings: RobotSettings
    private let timeline: TimelineRecorder

    init(env: RelayEnvironment, hub: DeviceHub, authenticator: Authenticator, turn: TurnEndpoint, webSocket: WebSocketEndpoint,
         push: PushCoordinator, missionRuns: MissionRuns, served: ServedDevices, settings: RobotSettings,
         timeline: TimelineRecorder, onReady: @escaping () -> Void) {
        (self.settings, self.timeline) = (settings, timeline)
        self.onReady = onReady
        self.served = served
        self.push = push
        self.missionRuns = missionRuns
        self.env = env
        self.hub = hub
        self.authenticator = authenticator
        self.turn = turn
        self.webSocket = webSocket
    }

    func handle(_ event: StoreEvent) {
        let credentials = authenticator.credentials
        switch event {
        case .health(let health):
            env.log.log(level: health.state == .ready ? .info : .warning, "store_health",
                        metadata: ["state": "\(health.state.rawValue)", "reason": "\(health.reason)"])
            self.health = health
            if health.state == .ready, !announcedReady {
                announcedReady = true
                onReady()
            }
        case .credentialsMayBeStale:
            // Changes may have been missed: read again every token held or in use here.
            credentials.forgetUnknown()
            authenticator.lookups.recheck(ids: Array(Set(credentials.ids + hub.allSessions.map(\.tokenID))))
        case .credentialsFound(let digests, let entries):
            credentials.found(digests: digests, entries: entries)
            authenticator.lookups.answered(digests)
        case .credentialsRechecked(let ids, let entries):
            let current = Dictionary(entries.map { ($0.token.id, $0) }, uniquingKeysWith: { a, _ in a })
            for id in ids { credentials.changed(id: id, entry: current[id]) }
            // Sockets whose token was revoked or removed, or whose device was disabled, while we were
            // away (a socket opened since was checked against a fresh read).
            let asked = Set(ids)
            hub.close(where: { session in
                guard asked.contains(session.tokenID) else { return false }
                guard let entry = current[session.tokenID] else { return true }
                return entry.token.revokedAt != nil || entry.deviceDisabled
            }, code: .revoked, reason: "token revoked or device disabled")
            for entry in entries where entry.token.revokedAt == nil { webSocket.tokenChanged(entry) }
            env.log.info("credentials_loaded", metadata: ["tokens": .stringConvertible(ids.count)])
        case .tokenChanged(let id, let entry):
            credentials.changed(id: id, entry: entry)
            // Live sessions take a new access level or expiry (those whose token it is; none for a new token).
            if let entry, entry.token.revokedAt == nil { webSocket.tokenChanged(entry) }
            if entry == nil || entry?.token.revokedAt != nil {
                let closed = hub.close(device: entry?.token.deviceID, where: { $0.tokenID == id }, code: .revoked,
                                       reason: "token revoked")
                if !closed.isEmpty {
                    env.log.info("token_revoked_sockets_closed", metadata: ["token_id": .stringConvertible(id),
                                                                            "sockets": .stringConvertible(closed.count)])
                }
            }
        case .turnSecrets(let secrets):
            webSocket.reschedule(turn.secretsLoaded(secrets))
            env.log.info("turn_secrets_loaded", metadata: ["realm": "\(env.configuration.turnRealm)",
                                                           "secrets": .stringConvertible(secrets.count)])
        case .devicesRead(let devices):
            served.read(devices)
        case .pushChanged(let device, let registrations):
            push.changed(device, registrations)
        case .liveActivityChanged(let device, let registrations):
            missionRuns.changed(device, registrations)
        case .runEnded(let device):
            missionRuns.runEnded(device)
        case .sealedEpoch(let device, let epoch):
            // Every node hears it; the one holding the device tells its apps.
            served.sealed(device, epoch: epoch, announce: true)
        case .rosterProposed(let device, let signed):
            // For the robot to verify and accept: `{"type":"roster",…the signed envelope…}`.
            if let robot = hub.robot(of: device) {
                hub.deliver(Payload(Array(#"{"type":"roster","#.utf8) + Array(signed.utf8.dropFirst())), to: robot)
            }
        case .settingsChanged(let device, let versions):
            settings.changed(device, versions)
        case .timelineStored(let device, let newest, let forGuests):
            timeline.stored(device, newest: newest, forGuests: forGuests)
        case .deviceChanged(let device, let disabled):
            credentials.setDisabled(device, disabled)
            if disabled {
                let closed = hub.close(where: { $0.deviceID == device }, code: .revoked, reason: "device disabled")
                env.log.info("device_disabled_sockets_closed", metadata: ["device": "\(device.rawValue)",
                                                                          "sockets": .stringConvertible(closed.count)])
            }
        }
    }
}

extension StoreSync: MetricsReporting {
    func report(to metrics: MetricsSink) {
        metrics.gauge("wimz_database_up", "1 when the store is reachable and its schema current.", health.state == .ready ? 1 : 0)
        metrics.counter("wimz_database_connections_replaced_total",
                        "Database connections that were lost (a failover, a restart, a demoted primary) and replaced.",
                        DatabaseThread.connectionsReplaced.load(ordering: .relaxed))
    }
}
