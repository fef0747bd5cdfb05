import RelayCore
import RelayWorkers

/// The relay's components, built and connected: what `RelayServer` runs on the lws service
/// thread, and what the in-process tests drive with a fake loop, fake clients and a clock of
/// their own. Each component keeps its state private; they meet only here.
final class RelayComponents {
    let env: RelayEnvironment
    /// The devices and their sessions: built here and handed to the components that work with it.
    let hub: DeviceHub
    let authenticator: Authenticator
    let database: DatabaseExchanges
    let cluster: ClusterCoordinator
    let turn: TurnEndpoint
    let robotHTTP: RobotHTTPEndpoint
    let pairing: PairingEndpoint
    let state: StateEndpoint
    let push: PushCoordinator
    let missionRuns: MissionRuns
    let served: ServedDevices
    let household: HouseholdEndpoint
    let sealed: SealedEndpoint
    let webSocket: WebSocketEndpoint
    let stop: StopSequence
    let store: StoreSync
    let router: Router
    /// How a request's head is read on an lws connection (the gate's parse, or lws's).
    let heads: RequestHeads
    /// The plain-HTTP front door on `gateListener`'s sockets (nil with TLS served by lws).
    let gate: HTTPGate?
    /// Events from other threads, drained on the service thread (`drainMailbox`).
    private let mailbox: Mailbox<ServiceEvent>
    /// Re-reads the TLS certificate and key (SIGHUP; the loop's).
    private let reloadTLS: () -> Void

    /// A deferred answer is written on its client's connection by the gate (`gateListener`'s
    /// sockets), by `respond` in tests that have no gate, and with TLS served by lws (neither)
    /// when the connection turns writeable. `webSocketIO` is the WebSocket connections' socket
    /// layer (lws's, unless a test records).
    init(env: RelayEnvironment, workers: Workers, mailbox: Mailbox<ServiceEvent>, loop: LoopControl,
         gateListener: GateListener?, webSocketIO: WebSocketIO, reloadTLS: @escaping () -> Void = {},
         respond testResponder: ((HTTPClient, HTTPResponse) -> Void)? = nil) {
        self.env = env
        let hub = DeviceHub(limits: DeviceHub.Limits(env.configuration), clock: env.clock)
        self.hub = hub
        self.mailbox = mailbox
        self.reloadTLS = reloadTLS
        let gate = gateListener.map {
            HTTPGate(io: $0, clock: env.clock,
                     deferredTimeoutSeconds: Int32(max(30, env.configuration.robotHTTPTimeoutSeconds.rounded(.up) + 5)),
                     lingering: HTTPGate.Lingering(largestBody: Route.BodyLimit.largest(env.configuration)))
        }
        self.gate = gate
        let respond = gate.map { gate in { [unowned gate] (client: HTTPClient, response: HTTPResponse) in gate.respond(client.handle, with: response) } }
            ?? testResponder
        authenticator = Authenticator(configuration: env.configuration, clock: env.clock, lookups: workers.credentials)
        database = DatabaseExchanges(env: env, worker: workers.database, authenticator: authenticator, mailbox: mailbox, respond: respond)
        cluster = ClusterCoordinator(env: env, hub: hub, agent: workers.cluster, database: database)
        turn = TurnEndpoint(env: env, hub: hub, authenticator: authenticator)
        robotHTTP = RobotHTTPEndpoint(env: env, hub: hub, cluster: cluster, respond: respond ?? { _, _ in })
        pairing = PairingEndpoint(env: env, authenticator: authenticator, database: database, mailbox: mailbox)
        state = StateEndpoint(env: env, hub: hub, database: database)
        push = PushCoordinator(env: env, hub: hub, authenticator: authenticator, database: database, mailbox: mailbox,
                               sender: workers.push)
        missionRuns = MissionRuns(env: env, hub: hub, database: database, mailbox: mailbox,
                                  sender: LiveActivitySender(env: env, hub: hub, database: database, apns: push.sender))
        served = ServedDevices(followed: workers.followedDevices, push: push, missionRuns: missionRuns, hub: hub)
        household = HouseholdEndpoint(env: env, hub: hub, authenticator: authenticator, database: database, mailbox: mailbox)
        sealed = SealedEndpoint(env: env, authenticator: authenticator, database: database)
        heads = RequestHeads(listener: gateListener)
        stop = StopSequence(env: env, hub: hub, loop: loop, cluster: cluster)
        webSocket = WebSocketEndpoint(env: env, hub: hub, authenticator: authenticator, turn: turn, robotHTTP: robotHTTP, heads: heads,
                                      io: webSocketIO, stop: stop, onAppAttached: { [unowned push] in push.appConnected($0) })
        store = StoreSync(env: env, hub: hub, authenticator: authenticator, turn: turn, webSocket: webSocket, push: push,
                          missionRuns: missionRuns, served: served)
        // `/metrics`: every component reports its own series.
        let metrics = MetricsEndpoint(registry: env.metrics.registry,
                                      reporters: [env, hub, authenticator, database, cluster, turn,
                                                  robotHTTP, push, missionRuns, missionRuns.sender, served, store, stop, env.audit.writer,
                                                  workers.turnCutter, workers.retention] + (gate.map { [$0] } ?? []))
        router = Router(env: env, handlers: .init(authenticator: authenticator, store: store, stop: stop, metrics: metrics,
                                                  turn: turn, robotHTTP: robotHTTP, pairing: pairing, state: state,
                                                  push: PushEndpoint(env: env, authenticator: authenticator, database: database, push: push),
                                                  liveActivity: LiveActivityEndpoint(authenticator: authenticator, database: database, push: push),
                                                  household: household, sealed: sealed, database: database, cluster: cluster))
        // Circular, so set here: the stop sequence is built on the cluster's coordinator.
        cluster.isStopping = { [unowned stop] in stop.stopping }
        hub.observer = self
        gate?.handler = self
    }

    /// Once a second: housekeeping that is not per session.
    func tick(now: UInt64) {
        turn.sweep(now: now)
        robotHTTP.sweep(now: now)
        pairing.sweep(now: now)
        household.sweep(now: now)
        sealed.sweep(now: now)
        state.flush()
        push.tick(now: now)
        missionRuns.tick(now: now)
        cluster.report(sockets: stop.openConnections, devices: hub.deviceCount)
        authenticator.sweep(now: now)
        hub.sweepHistories(now: now)
    }

    /// Every wheel interval (`WebSocketEndpoint.wheelInterval`, 10 ms): every deadline the relay
    /// keeps — connections and requests past theirs, robot HTTP exchanges past their timeout,
    /// parked resumes, the stop's deadline — then the sessions that are due. Tests drive it with
    /// their own clock.
    func tickWheel(now: UInt64) {
        webSocket.expireConnections(now: now)
        authenticator.lookups.expire(now: now)
        gate?.expire(now: now)
        robotHTTP.expire(now: now)
        hub.expireParked(now: now)
        stop.checkDeadline(now: now)
        webSocket.tickSessions(now: now, wall: env.clock.wall())
    }

    /// Every 100 ms: the drain's end, the cluster's batches.
    func tickCluster() {
        stop.tick(now: env.clock.monotonic())
        cluster.flush()
    }

    /// Every event other threads posted (`LWS_CALLBACK_EVENT_WAIT_CANCELLED`).
    func drainMailbox() {
        for event in mailbox.drain() { handle(event) }
    }

    /// One event from another thread, on the service thread.
    func handle(_ event: ServiceEvent) {
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
        case .missionRun(let runEvent): missionRuns.handle(runEvent)
        case .liveActivityOutcome(let outcome): missionRuns.sender.handle(outcome)
        }
    }
}

/// The hub's reports, each handed to the component it concerns: the one place the hub is wired.
extension RelayComponents: DeviceHubObserver {
    func hubDropped(_ reason: DropReason) { env.counters.drops[reason, default: 0] += 1 }
    func hubReplacedRobot(_ old: Session, with new: Session) { env.robotReplaced(old, by: new) }
    func hubDeviceArrived(_ device: DeviceID) {
        cluster.deviceArrived(device)
        served.arrived(device)
    }
    func hubDeviceLeft(_ device: DeviceID) { served.left(device) }
    func hubPresenceChanged(_ device: DeviceID, robotLeftAt: UnixTime?) {
        cluster.presenceChanged(device, robotLeftAt: robotLeftAt)
        missionRuns.presenceChanged(device, robotLeftAt: robotLeftAt)
    }
    func hubMissionSignal(_ device: DeviceID, _ signal: MissionSignal) { missionRuns.signal(device, signal) }
    func hubRobotAnsweredHTTP(_ frame: Payload, from robot: Session) { robotHTTP.answered(frame, from: robot) }
    func hubPushEvent(_ device: DeviceID, kind: PushKind, message: Payload, place: (epoch: String, seq: UInt64)) {
        push.robotEvent(device, kind, message, place)
    }
}

/// The plain-HTTP front door's requests: every one through the router, answers logged.
extension RelayComponents: HTTPGateHandler {
    func presentedCredential(in head: HTTPRequestHead) -> PresentedCredential? { authenticator.presentedCredential(in: head) }

    func awaitCredential(for head: HTTPRequestHead, peer: () -> String, then resume: @escaping () -> Void) -> CredentialWait {
        authenticator.awaitCredential(for: head, peer: peer, then: resume)
    }

    func admit(_ request: HTTPRequest, contentLength: Int) -> Router.Admission {
        let started = env.clock.monotonic()
        let admission = router.admit(request, contentLength: contentLength)
        if case .answer(let response) = admission { env.logRequest(request, status: response.status, startedAt: started) }
        return admission
    }

    func serve(_ request: HTTPRequest, _ routed: Router.Routed, bodyWasRead: Bool, body: [UInt8]) -> HTTPResponse? {
        let started = env.clock.monotonic()
        guard let response = router.serve(request, routed, recheck: bodyWasRead, body: body) else { return nil }  // answered later
        env.logRequest(request, status: response.status, startedAt: started)
        return response
    }

    func refused(_ error: RelayError, peer: String) {
        env.counters.requestsRefused += 1
        env.log.info("http_request_refused", metadata: ["status": .stringConvertible(error.status), "code": "\(error.code)",
                                                        "message": "\(error.message)", "remote": "\(peer)"])
    }

    func gateConnectionClosed(_ wsi: OpaquePointer) {
        database.forget(HTTPClient(wsi))
        robotHTTP.cancel(HTTPClient(wsi))
    }
}
