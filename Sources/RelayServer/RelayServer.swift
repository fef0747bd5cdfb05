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

/// What the process running the server hears of its life, on the service thread (systemd's
/// READY=1, STOPPING=1 and watchdog pings): given at init, so nothing is linked afterwards.
public struct ServerHooks {
    /// Once, the first time the relay listens and the store is ready.
    public var ready: () -> Void
    /// When a graceful stop begins.
    public var stopping: () -> Void
    /// Once a second with the monotonic time: if the loop stalls, the ticks stop.
    public var tick: (UInt64) -> Void

    public init(ready: @escaping () -> Void = {}, stopping: @escaping () -> Void = {}, tick: @escaping (UInt64) -> Void = { _ in }) {
        (self.ready, self.stopping, self.tick) = (ready, stopping, tick)
    }
}

/// The daemon's composition root: builds the components and connects them. One libwebsockets
/// context (`ServiceLoop`) whose single service thread owns every socket and all relay state;
/// the database threads (`RelayWorkers`) talk to it only through its mailbox.
///
///     ServiceLoop ─ lws callbacks ─▶ LWSDispatch ─▶ WebSocketEndpoint (sessions, wheel)
///                                               └─▶ Router ─▶ Turn / RobotHTTP / Pairing /
///                                                            DatabaseExchanges / Metrics
///     mailbox ◀─ StoreMonitor, ClusterAgent, DatabaseWorker, signals   (ServiceEvents drains it)
public final class RelayServer {
    public let configuration: RelayConfiguration
    /// The port actually bound (differs from the configuration when it asked for 0).
    public var boundPort: Int { loop.boundPort }
    /// The once-a-second hook (`ServerHooks.tick`).
    private let onTick: (UInt64) -> Void

    private let callbacks = ServiceCallbacks()
    private let loop: ServiceLoop
    private let mailbox: Mailbox<ServiceEvent>
    private let workers: Workers
    /// What the lws callbacks reach (held here: the callbacks do not retain it).
    private let components: RelayComponents
    private var env: RelayEnvironment { components.env }
    private var stop: StopSequence { components.stop }

    public init(configuration: RelayConfiguration, migrator: Migrator, hooks: ServerHooks = ServerHooks()) throws {
        do {
            try configuration.validate()
        } catch {
            throw ServerError(description: error.description)
        }
        self.configuration = configuration
        onTick = hooks.tick
        loop = try ServiceLoop(configuration: configuration, callbacks: callbacks)
        let waker = loop.waker
        let mailbox = Mailbox<ServiceEvent>(wake: { waker.wake() })
        self.mailbox = mailbox
        let host = "\(HostName.current()):\(loop.boundPort)"
        let nodeID = configuration.nodeID ?? host
        guard NodeName.isValid(nodeID) else { throw ServerError(description: "invalid node id '\(nodeID)' (WIMZ_NODE_ID: [A-Za-z0-9_.:-]{1,128})") }
        let clock = RelayClock.system
        let workers = Workers(configuration: configuration,
                              identity: .init(nodeID: nodeID, address: configuration.nodeAddress ?? host, incarnation: try Crypto.uuidV4()),
                              migrator: migrator, mailbox: mailbox, clock: clock)
        self.workers = workers
        let env = RelayEnvironment(configuration: configuration, clock: clock,
                                   thread: loop.thread, audit: AuditTrail(writer: workers.audit, node: nodeID, clock: clock))
        components = RelayComponents(env: env, workers: workers, mailbox: mailbox, loop: loop, gateListener: loop.gateListener,
                                     webSocketIO: LWSWebSocketIO(closer: loop.gateListener.map { gate in
                                         LingeringCloser(removeFromLoop: { [unowned gate] in gate.removeFromEventLoop($0) })
                                     }), lwsAcceptedTCP: loop.gateListener == nil ? loop.clientTCP : nil,
                                     hooks: hooks, reloadTLS: { [unowned loop] in loop.reloadTLS() })
        callbacks.connect(components.dispatch)
    }

    deinit {
        // The callbacks do not retain the components: no lws callback may outlive them.
        loop.destroy()
    }

    /// What runs beside the service thread, in the order it starts: the audit writer first (all
    /// else audits), the database worker before what borrows its connection or queues on it.
    /// `run` stops it in the reverse order, so the audit writer — its queue written or spooled —
    /// goes last. The one place the workers start and stop.
    private var lifecycle: [LifecycleStep] {
        let workers = self.workers, components = self.components, loop = self.loop
        return [
            LifecycleStep("audit_writer", start: { workers.audit.start() }, stop: { workers.audit.stop() }),
            // lws's CLOSED callbacks queue the last disconnect events: the loop goes before the writer.
            LifecycleStep("event_loop", stop: { loop.destroy() }),
            LifecycleStep("database_worker", start: { workers.database.start() }, stop: { workers.database.stop() }),
            // The last replayed events, queued for the worker before it stops (and written if the database answers).
            LifecycleStep("state", stop: { components.state.flush() }),
            // The timeline's waiting entries: stored while the worker runs, or spooled for the next start.
            LifecycleStep("timeline", stop: { components.timelineRecorder.stop() }),
            LifecycleStep("store_monitor", start: { workers.monitor.start() }, stop: { workers.monitor.stop() }),
            // Leaving the cluster removes this node's presence with its row.
            LifecycleStep("cluster_agent", start: { workers.cluster.start() }, stop: { workers.cluster.stop() }),
            LifecycleStep("turn_cutter", start: { workers.turnCutter.start() }, stop: { workers.turnCutter.stop() }),
            LifecycleStep("retention", start: { workers.retention.start() }, stop: { workers.retention.stop() }),
            // Counted pushes go out now (nothing is lost to a restart); the sender gets 3 s.
            LifecycleStep("push", stop: { components.push.stop(within: 3) }),
        ]
    }

    /// Serves until `requestStop()`; returns after a graceful stop.
    public func run() {
        env.log.info("listening", metadata: ["address": "\(configuration.listenHost):\(loop.boundPort)", "version": "\(RelayBuild.version)",
                                             "event_loop": "\(configuration.eventLoop.rawValue)", "lws": "\(ServiceLoop.libraryVersion)"])
        for refused in loop.gateListener?.refusedTCPOptions ?? loop.clientTCP.refusals() {
            env.log.warning("tcp_option_unavailable", metadata: [
                "option": "\(refused.option)", "reason": "\(refused.reason)",
                "effect": "clients' sockets keep the kernel's own (docs/operations.md, Cellular links)"])
        }
        if configuration.turnAdminServers.isEmpty {
            env.log.warning("turn_admin_unset", metadata: ["effect": "a removed member's live TURN sessions are not cut (new credentials are refused); set WIMZ_TURN_ADMIN"])
        }
        let steps = lifecycle
        for step in steps { step.start() }
        loop.run(every: [(1_000_000, { [unowned self] in tick() }),
                         (WebSocketEndpoint.wheelInterval, { [components, env] in components.tickWheel(now: env.clock.monotonic()) }),
                         (100_000, { [components] in components.tickCluster() })])
        let loopEnded = env.clock.monotonic()
        // How long each part of the stop took (a slow stop shows where).
        func ms(_ from: UInt64?, _ to: UInt64) -> Logger.MetadataValue { .stringConvertible(from.map { Int64((to &- $0) / 1_000_000) } ?? -1) }
        var took: Logger.Metadata = ["closing_ms": ms(stop.closingStartedAt, loopEnded)]
        for step in steps.reversed() {
            let started = env.clock.monotonic()
            step.stop()
            took["\(step.name)_ms"] = ms(started, env.clock.monotonic())
        }
        env.log.info("stopped", metadata: took)
    }

    /// Starts a graceful stop. Safe from any thread.
    public func requestStop() { mailbox.post(.stop) }

    /// A handle other threads (signal watcher) may keep to steer the running server.
    public var control: RelayControl { RelayControl(mailbox: mailbox) }

    /// Once a second: housekeeping and the systemd watchdog.
    private func tick() {
        let now = env.clock.monotonic()
        components.tick(now: now)
        onTick(now)
    }
}
