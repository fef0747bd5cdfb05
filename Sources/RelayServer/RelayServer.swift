import Logging
import RelayCore
import RelayCrypto
import RelayStore
import RelayWorkers

/// Thread-safe requests to a running `RelayServer`.
public struct RelayControl: Sendable {
    let mailbox: Mailbox<ServiceEvent>

    /// Starts a graceful stop.
    public func requestStop() { mailbox.post(.stop) }

    /// Reloads the TLS certificate and key from their files.
    public func reloadTLS() { mailbox.post(.reloadTLS) }
}

/// The daemon's composition root: builds the components and connects them. One libwebsockets
/// context (`ServiceLoop`) whose single service thread owns every socket and all relay state;
/// the database threads (`RelayWorkers`) talk to it only through its mailbox.
///
///     ServiceLoop ─ lws callbacks ─▶ ServiceCallbacks ─▶ WebSocketEndpoint (sessions, wheel)
///                                                    └─▶ Router ─▶ Turn / RobotHTTP / Pairing /
///                                                                 DatabaseExchanges / Metrics
///     mailbox ◀─ StoreMonitor, ClusterAgent, DatabaseWorker, signals
public final class RelayServer {
    public let configuration: RelayConfiguration
    /// The port actually bound (differs from the configuration when it asked for 0).
    public var boundPort: Int { loop.boundPort }
    /// Called on the service thread once the relay listens and the store is ready (systemd READY=1).
    public var onReady: (() -> Void)? { get { store.onReady } set { store.onReady = newValue } }
    /// Called on the service thread when a graceful stop begins (systemd STOPPING=1).
    public var onStopping: (() -> Void)? { get { stop.onStopping } set { stop.onStopping = newValue } }
    /// Called on the service thread once a second with the monotonic time (systemd watchdog):
    /// if the loop stalls, the pings stop.
    public var onTick: ((UInt64) -> Void)?

    private let callbacks = ServiceCallbacks()
    private let loop: ServiceLoop
    private let mailbox: Mailbox<ServiceEvent>
    private let monitor: StoreMonitor
    /// What the lws callbacks reach (held here: the callbacks do not retain it).
    private let components: RelayComponents
    private var env: RelayEnvironment { components.env }
    private var store: StoreSync { components.store }
    private var stop: StopSequence { components.stop }

    public init(configuration: RelayConfiguration, migrator: Migrator) throws {
        do {
            try configuration.validate()
        } catch {
            throw ServerError(description: error.description)
        }
        self.configuration = configuration
        loop = try ServiceLoop(configuration: configuration, callbacks: callbacks)
        let waker = loop.waker
        let mailbox = Mailbox<ServiceEvent>(wake: { waker.wake() })
        self.mailbox = mailbox
        let host = "\(HostName.current()):\(loop.boundPort)"
        let nodeID = configuration.nodeID ?? host
        guard NodeName.isValid(nodeID) else { throw ServerError(description: "invalid node id '\(nodeID)' (WIMZ_NODE_ID: [A-Za-z0-9_.:-]{1,128})") }
        let agent = ClusterAgent(conninfo: configuration.databaseURL,
                                 identity: .init(nodeID: nodeID, address: configuration.nodeAddress ?? host, incarnation: try Crypto.uuidV4()),
                                 leaseSeconds: configuration.clusterLeaseSeconds) { mailbox.post(.cluster($0)) }
        let credentialQueue = CredentialQueue()
        monitor = StoreMonitor(conninfo: configuration.databaseURL, node: nodeID, migrator: migrator, turnRealm: configuration.turnRealm,
                               credentials: credentialQueue) {
            mailbox.post(.store($0))
        }
        let auditWriter = AuditWriter(conninfo: configuration.databaseURL, node: nodeID, spoolDirectory: configuration.spoolDirectory)
        let env = RelayEnvironment(configuration: configuration, clock: .system,
                                   thread: loop.thread, audit: AuditTrail(writer: auditWriter, node: nodeID, clock: .system))
        components = RelayComponents(env: env, mailbox: mailbox, agent: agent, loop: loop, credentialQueue: credentialQueue,
                                     gateListener: loop.gateListener,
                                     webSocketIO: LWSWebSocketIO(closer: loop.gateListener.map { gate in
                                         LingeringCloser(removeFromLoop: { [unowned gate] in gate.removeFromEventLoop($0) })
                                     }), reloadTLS: { [unowned loop] in loop.reloadTLS() })
        callbacks.connect(components)
    }

    deinit {
        // The callbacks do not retain the components: no lws callback may outlive them.
        loop.destroy()
    }

    /// Serves until `requestStop()`; returns after a graceful stop.
    public func run() {
        env.log.info("listening", metadata: ["address": "\(configuration.listenHost):\(loop.boundPort)",
                                             "event_loop": "\(configuration.eventLoop.rawValue)", "lws": "\(ServiceLoop.libraryVersion)"])
        monitor.start()
        env.audit.writer.start()
        components.database.worker.start()
        components.cluster.agent.start()
        components.turnCutter.start()
        components.retention.start()
        if configuration.turnAdminServers.isEmpty {
            env.log.warning("turn_admin_unset", metadata: ["effect": "a removed member's live TURN sessions are not cut (new credentials are refused); set WIMZ_TURN_ADMIN"])
        }
        loop.run(every: [(1_000_000, { [unowned self] in tick() }),
                         (WebSocketEndpoint.wheelInterval, { [components, env] in components.tickWheel(now: env.clock.monotonic()) }),
                         (100_000, { [components] in components.tickCluster() })])
        let loopEnded = env.clock.monotonic()
        // Counted pushes go out now (nothing is lost to a restart); the sender gets 3 s.
        components.push.stop(within: 3)
        // Leaving the cluster removes this node's presence with its row.
        components.cluster.agent.stop()
        monitor.stop()
        // They borrow the worker's connection: stopped before it.
        components.turnCutter.stop()
        components.retention.stop()
        // The last replayed events, written by the worker's last jobs if the database answers.
        components.state.flush()
        components.database.worker.stop()
        let left = env.clock.monotonic()
        loop.destroy()
        let destroyed = env.clock.monotonic()
        // CLOSED callbacks above queued the last disconnect events: store or spool them.
        env.audit.writer.stop()
        // How long each part of the stop took (a slow stop shows where).
        func ms(_ from: UInt64?, _ to: UInt64) -> Logger.MetadataValue { .stringConvertible(from.map { Int64((to &- $0) / 1_000_000) } ?? -1) }
        let end = env.clock.monotonic()
        env.log.info("stopped", metadata: ["closing_ms": ms(stop.closingStartedAt, loopEnded), "leave_ms": ms(loopEnded, left),
                                           "destroy_ms": ms(left, destroyed), "flush_ms": ms(destroyed, end)])
    }

    /// Starts a graceful stop. Safe from any thread.
    public func requestStop() { mailbox.post(.stop) }

    /// A handle other threads (signal watcher) may keep to steer the running server.
    public var control: RelayControl { RelayControl(mailbox: mailbox) }

    /// Once a second: housekeeping and the systemd watchdog.
    private func tick() {
        let now = env.clock.monotonic()
        components.tick(now: now)
        onTick?(now)
    }
}
