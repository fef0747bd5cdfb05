import RelayCore
import RelayWorkers

/// The relay's components, built and connected: what `RelayServer` runs on the lws service
/// thread, and what the in-process tests drive with a fake loop, fake clients and a clock of
/// their own. Each component keeps its state private; they meet only here.
final class RelayComponents {
    let env: RelayEnvironment
    let authenticator: Authenticator
    let database: DatabaseExchanges
    let cluster: ClusterCoordinator
    let turn: TurnEndpoint
    let robotHTTP: RobotHTTPEndpoint
    let pairing: PairingEndpoint
    let state: StateEndpoint
    let push: PushCoordinator
    let household: HouseholdEndpoint
    /// Cuts removed members' TURN sessions on coturn (its own thread; started by `RelayServer`).
    let turnCutter: TurnSessionCutter
    /// Prunes the tables that grow per event and reads table sizes (its own thread; started by `RelayServer`).
    let retention: RetentionPruner
    let webSocket: WebSocketEndpoint
    let stop: StopSequence
    let store: StoreSync
    let router: Router
    /// How a request's head is read on an lws connection (the gate's parse, or lws's).
    let heads: RequestHeads
    /// The plain-HTTP front door on `gateListener`'s sockets (nil with TLS served by lws).
    let gate: HTTPGate?

    /// A deferred answer is written on its client's connection by the gate (`gateListener`'s
    /// sockets), by `respond` in tests that have no gate, and with TLS served by lws (neither)
    /// when the connection turns writeable. `webSocketIO` is the WebSocket connections' socket
    /// layer (lws's, unless a test records).
    init(env: RelayEnvironment, mailbox: Mailbox<ServiceEvent>, agent: ClusterAgent, loop: LoopControl,
         gateListener: GateListener?, webSocketIO: WebSocketIO, respond testResponder: ((HTTPClient, HTTPResponse) -> Void)? = nil) {
        self.env = env
        let gate = gateListener.map { HTTPGate(io: $0, clock: env.clock) }
        self.gate = gate
        let respond = gate.map { gate in { [unowned gate] (client: HTTPClient, response: HTTPResponse) in gate.respond(client.handle, with: response) } }
            ?? testResponder
        authenticator = Authenticator(configuration: env.configuration, clock: env.clock)
        database = DatabaseExchanges(env: env, authenticator: authenticator, mailbox: mailbox, respond: respond)
        cluster = ClusterCoordinator(env: env, agent: agent, database: database)
        turn = TurnEndpoint(env: env, authenticator: authenticator)
        robotHTTP = RobotHTTPEndpoint(env: env, cluster: cluster, respond: respond ?? { _, _ in })
        pairing = PairingEndpoint(env: env, authenticator: authenticator, database: database, mailbox: mailbox)
        state = StateEndpoint(env: env, database: database)
        push = PushCoordinator(env: env, authenticator: authenticator, database: database, mailbox: mailbox)
        household = HouseholdEndpoint(env: env, authenticator: authenticator, database: database, mailbox: mailbox)
        turnCutter = TurnSessionCutter(conninfo: env.configuration.databaseURL, servers: env.configuration.turnAdminServers,
                                       password: env.configuration.turnAdminPassword, node: env.audit.node,
                                       allocationLifetime: env.configuration.turnMaxAllocationLifetime)
        retention = RetentionPruner(conninfo: env.configuration.databaseURL, policy: .init(env.configuration))
        heads = RequestHeads(listener: gateListener)
        webSocket = WebSocketEndpoint(env: env, authenticator: authenticator, turn: turn, robotHTTP: robotHTTP, heads: heads,
                                      io: webSocketIO)
        stop = StopSequence(env: env, loop: loop, cluster: cluster) { [unowned webSocket] in webSocket.openConnections }
        store = StoreSync(env: env, authenticator: authenticator, turn: turn, webSocket: webSocket, push: push, gate: gate)
        // `/metrics`: every component reports its own series.
        let metrics = MetricsEndpoint(registry: env.metrics.registry,
                                      reporters: [env, authenticator, database, cluster, turn,
                                                  robotHTTP, push, store, stop, env.audit.writer, turnCutter, retention])
        router = Router(env: env, handlers: .init(authenticator: authenticator, store: store, stop: stop, metrics: metrics,
                                                  turn: turn, robotHTTP: robotHTTP, pairing: pairing, state: state,
                                                  push: PushEndpoint(env: env, authenticator: authenticator, database: database, push: push),
                                                  household: household, database: database, cluster: cluster))
        webSocket.stop = stop
        webSocket.onAppAttached = { [unowned push] in push.appConnected($0) }
        cluster.isStopping = { [unowned stop] in stop.stopping }
        env.hub.onRobotHTTP = { [unowned robotHTTP] payload, robot in robotHTTP.answered(payload, from: robot) }
    }

    /// Once a second: housekeeping that is not per session.
    func tick(now: UInt64) {
        turn.service.sweepLimiters(now: now)
        robotHTTP.sweep(now: now)
        pairing.sweep(now: now)
        household.sweep(now: now)
        state.flush()
        push.tick(now: now)
        cluster.agent.report(sockets: webSocket.openConnections, devices: env.hub.deviceCount)
        authenticator.failures.sweep(now: now)
        env.hub.sweepHistories(now: now)
        webSocket.closeExpiredSessions(wall: env.clock.wall())
    }

    /// Every wheel interval (`WebSocketEndpoint.wheelInterval`, 10 ms): every deadline the relay
    /// keeps — connections and requests past theirs, robot HTTP exchanges past their timeout,
    /// parked resumes, the stop's deadline — then the sessions that are due. Tests drive it with
    /// their own clock.
    func tickWheel(now: UInt64) {
        webSocket.expireConnections(now: now)
        gate?.expire(now: now)
        robotHTTP.expire(now: now)
        env.hub.expireParked(now: now)
        stop.checkDeadline(now: now)
        webSocket.tickSessions(now: now, wall: env.clock.wall())
    }

    /// Every 100 ms: the drain's end, the cluster's batches.
    func tickCluster() {
        stop.tick(now: env.clock.monotonic())
        cluster.flush()
    }

    /// One event from another thread, on the service thread.
    func handle(_ event: ServiceEvent, reloadTLS: () -> Void) {
        env.thread.assertOnServiceThread()
        switch event {
        case .stop: stop.beginDrain()
        case .store(let storeEvent): store.handle(storeEvent)
        case .reloadTLS:
            reloadTLS()
            push.reloadKey()
        case .databaseAnswer(let id, let response): database.answered(id, response)
        case .cluster(let clusterEvent): cluster.handle(clusterEvent)
        case .push(let pushEvent): push.handle(pushEvent)
        }
    }
}
