import Logging
import RelayCore
import RelayWorkers

/// Applies what the store monitor reports: the store's health (for `/readyz` and systemd's
/// READY=1), the token mirror (snapshot and changes, closing what was revoked), device
/// disabling, the TURN secrets, the push registrations and the Live Activity tokens.
final class StoreSync {
    /// Latest store state, as reported by the monitor.
    private(set) var health = StoreHealth(state: .unavailable, reason: "not checked yet")
    /// Called once, the first time the store is ready (systemd READY=1).
    var onReady: (() -> Void)?
    private var announcedReady = false
    private let env: RelayEnvironment
    private let hub: DeviceHub
    private let authenticator: Authenticator
    private let turn: TurnEndpoint
    private let webSocket: WebSocketEndpoint
    private let push: PushCoordinator
    private let missionRuns: MissionRuns
    private let gate: HTTPGate?

    init(env: RelayEnvironment, hub: DeviceHub, authenticator: Authenticator, turn: TurnEndpoint, webSocket: WebSocketEndpoint,
         push: PushCoordinator, missionRuns: MissionRuns, gate: HTTPGate?) {
        self.push = push
        self.missionRuns = missionRuns
        self.env = env
        self.hub = hub
        self.authenticator = authenticator
        self.turn = turn
        self.webSocket = webSocket
        self.gate = gate
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
                onReady?()
            }
        case .credentialSnapshot(let entries):
            credentials.load(entries)
            gate?.releaseHeldUpgrades()
            // Anything no longer in the snapshot was revoked, expired or removed while we were away.
            let active = Set(entries.map(\.token.id))
            let disabled = Set(entries.filter(\.deviceDisabled).map(\.token.deviceID))
            hub.close(where: { !active.contains($0.tokenID) || disabled.contains($0.deviceID) },
                      code: .revoked, reason: "token revoked or device disabled")
            env.log.info("credentials_loaded", metadata: ["tokens": .stringConvertible(entries.count)])
        case .tokenChanged(let id, let entry):
            let previous = credentials.update(id: id, entry: entry)
            // Live sessions take a new access level or expiry: only a token the mirror held can
            // have any (a new token has none, and the NOTIFY after a change applied here is a repeat).
            if let entry, entry.token.revokedAt == nil, let previous,
               previous.token.rights != entry.token.rights || previous.token.expiresAt != entry.token.expiresAt {
                webSocket.tokenChanged(entry)
            }
            if entry == nil || entry?.token.revokedAt != nil {
                let closed = hub.close(where: { $0.tokenID == id }, code: .revoked, reason: "token revoked")
                if !closed.isEmpty {
                    env.log.info("token_revoked_sockets_closed", metadata: ["token_id": .stringConvertible(id),
                                                                            "sockets": .stringConvertible(closed.count)])
                }
            }
        case .turnSecrets(let secrets):
            webSocket.reschedule(turn.secretsLoaded(secrets))
            env.log.info("turn_secrets_loaded", metadata: ["realm": "\(env.configuration.turnRealm)",
                                                           "secrets": .stringConvertible(secrets.count)])
        case .pushSnapshot(let registrations):
            push.load(registrations)
        case .pushChanged(let device, let registrations):
            push.changed(device, registrations)
        case .liveActivitySnapshot(let registrations):
            missionRuns.load(registrations)
        case .liveActivityChanged(let device, let registrations):
            missionRuns.changed(device, registrations)
        case .runEnded(let device):
            missionRuns.runEnded(device)
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
    }
}
