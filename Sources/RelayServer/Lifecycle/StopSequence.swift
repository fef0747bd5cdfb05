import Logging
import RelayCore
import RelayWorkers

/// The graceful stop (SIGTERM): `/readyz` turns 503 at once so the balancer stops choosing this
/// node; when other nodes are live, sockets stay open for `drainSeconds` (the balancer's
/// detection time) and are then told 1012 to reconnect elsewhere at once. A lone node closes
/// with 1001 at once. The loop ends when every socket has closed or the grace period is over.
final class StopSequence {
    /// True once sockets are being closed: new upgrades get 503.
    private(set) var stopping = false
    /// When the closing began (for the `stopped` log line).
    private(set) var closingStartedAt: UInt64?
    /// Called when the drain begins (systemd STOPPING=1).
    private let onStopping: () -> Void
    private let env: RelayEnvironment
    private let hub: DeviceHub
    private let loop: LoopControl
    /// Told the node drains (its lease row says so).
    private let agent: ClusterAgent
    private let membership: ClusterMembership
    /// Open WebSocket connections (ESTABLISHED, not yet CLOSED): the stop ends when none is left.
    private(set) var openConnections = 0
    private var drainUntil: UInt64?
    private var deadline: UInt64?

    init(env: RelayEnvironment, hub: DeviceHub, loop: LoopControl, agent: ClusterAgent, membership: ClusterMembership,
         onStopping: @escaping () -> Void) {
        self.onStopping = onStopping
        self.env = env
        self.hub = hub
        self.loop = loop
        self.agent = agent
        self.membership = membership
    }

    /// Whether `/readyz` must say 503 because this node is on its way out.
    var isDraining: Bool { drainUntil != nil || stopping }

    /// SIGTERM arrived.
    func beginDrain() {
        guard drainUntil == nil, !stopping, !loop.finished else { return }
        agent.setDraining()
        onStopping()
        let peers = membership.liveNodes - 1
        env.log.info("draining", metadata: ["open_connections": .stringConvertible(openConnections),
                                            "live_peers": .stringConvertible(peers),
                                            "drain_seconds": .stringConvertible(env.configuration.drainSeconds)])
        if peers > 0, env.configuration.drainSeconds > 0 {
            drainUntil = env.clock.monotonic() + UInt64(env.configuration.drainSeconds * 1e9)
        } else {
            closeAll()
        }
    }

    /// Every 100 ms: ends a drain whose time is up.
    func tick(now: UInt64) {
        if let until = drainUntil, now >= until { closeAll() }
    }

    /// Every wheel tick: a stop past its grace period ends the loop with sockets still open.
    func checkDeadline(now: UInt64) {
        if stopping, let deadline, now >= deadline { loop.finish() }
    }

    /// A WebSocket connection was established.
    func connectionOpened() { openConnections += 1 }

    /// A socket closed: the last one of a stop ends the loop.
    func connectionClosed() {
        openConnections -= 1
        if stopping && openConnections == 0 { loop.finish() }
    }

    /// The end of a drain: refuse new upgrades, close every socket (1012 when other nodes can
    /// take the clients, 1001 otherwise), and leave the loop when all have closed or the grace
    /// period is over.
    private func closeAll() {
        drainUntil = nil
        guard !stopping, !loop.finished else { return }
        stopping = true
        closingStartedAt = env.clock.monotonic()
        // Nothing new: clients get "refused" and retry (elsewhere, behind a balancer) while the
        // service thread closes what is open.
        loop.stopAccepting()
        env.log.info("stopping", metadata: ["open_connections": .stringConvertible(openConnections)])
        if membership.liveNodes > 1 {
            hub.close(where: { _ in true }, code: .reconnectNow, reason: "node draining; reconnect")
        } else {
            hub.close(where: { _ in true }, code: .goingAway, reason: "server shutting down")
        }
        deadline = env.clock.monotonic() + UInt64(env.configuration.shutdownGraceSeconds) * 1_000_000_000
        if openConnections == 0 { loop.finish() }
    }
}

/// What the stop sequence needs of the service loop (a fake in the in-process tests).
protocol LoopControl: AnyObject {
    /// True once the loop is to end.
    var finished: Bool { get }
    /// Ends the loop.
    func finish()
    /// Accepts no new connections (those already open stay).
    func stopAccepting()
}

extension StopSequence: MetricsReporting {
    func report(to metrics: MetricsSink) {
        metrics.gauge("wimz_cluster_draining", "1 while this node drains for a stop.", isDraining ? 1 : 0)
    }
}
