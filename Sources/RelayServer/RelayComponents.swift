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
    let settings: SettingsEndpoint
    let robotSettings: RobotSettings
    let timeline: TimelineEndpoint
    let timelineRecorder: TimelineRecorder
    let webSocket: WebSocketEndpoint
    let stop: StopSequence
    let store: StoreSync
    let router: Router
    /// How a request's head is read on an lws connection (the gate's parse, or lws's).
    let heads: RequestHeads
    /// What the gate hands the requests it reads to (the router, the caller's checks, the log).
    let gateRequests: GateRequests
    /// The plain-HTTP front door on `gateListener`'s sockets (nil with TLS served by lws).
    let gate: HTTPGate?
    /// Where the hub's reports go.
    let hubReports: HubReports
    /// Events from other threads, handled on the service thread.
    let events: ServiceEvents
    /// Where lws's callbacks go (`ServiceCallbacks` reaches it unretained).
    let dispatch: LWSDispatch

    /// Every component, built in the order they depend on each other, each given what it needs.
    /// A deferred answer is written on its client's connection by whoever reads it (its
    /// `HTTPClient`'s answerer: the gate, or a test's recorder), and with TLS served by lws (no
    /// gate) when the connection turns writeable. `webSocketIO` is the WebSocket connections'
    /// socket layer (lws's, unless a test records). `lwsAcceptedTCP`: the TCP options of the
    /// connections lws accepts itself (TLS served by lws; the gate's inherit their listener's).
    init(env: RelayEnvironment, workers: Workers, mailbox: Mailbox<ServiceEvent>, loop: LoopControl,
         gateListener: GateListener?, webSocketIO: WebSocketIO, lwsAcceptedTCP: TCPLiveness? = nil, hooks: ServerHooks = ServerHooks(),
         reloadTLS: @escaping () -> Void = {}) {
        self.env = env
        let hub = DeviceHub(limits: DeviceHub.Limits(env.configuration), clock: env.clock)
        self.hub = hub
        authenticator = Authenticator(configuration: env.configuration, clock: env.clock, lookups: workers.credentials)
        database = DatabaseExchanges(env: env, worker: workers.database, authenticator: authenticator, mailbox: mailbox)
        // The cluster's view, written by its coordinator and read by the stop sequence.
        let membership = ClusterMembership()
        stop = StopSequence(env: env, hub: hub, loop: loop, agent: workers.cluster, membership: membership, onStopping: hooks.stopping)
        cluster = ClusterCoordinator(env: env, hub: hub, agent: workers.cluster, membership: membership, database: database, stop: stop)
        turn = TurnEndpoint(env: env, hub: hub, authenticator: authenticator)
        robotHTTP = RobotHTTPEndpoint(env: env, hub: hub, cluster: cluster)
        pairing = PairingEndpoint(env: env, authenticator: authenticator, database: database, mailbox: mailbox)
        state = StateEndpoint(env: env, hub: hub, database: database)
        push = PushCoordinator(env: env, hub: hub, authenticator: authenticator, database: database, mailbox: mailbox,
                               sender: workers.push)
        timelineRecorder = TimelineRecorder(env: env, hub: hub, worker: workers.database, mailbox: mailbox)
        missionRuns = MissionRuns(env: env, hub: hub, database: database, mailbox: mailbox,
                                  sender: LiveActivitySender(env: env, hub: hub, database: database, apns: push.sender), timeline: timelineRecorder)
        robotSettings = RobotSettings(env: env, hub: hub, worker: workers.database, mailbox: mailbox)
        served = ServedDevices(followed: workers.followedDevices, push: push, missionRuns: missionRuns, hub: hub, settings: robotSettings)
        household = HouseholdEndpoint(env: env, hub: hub, authenticator: authenticator, database: database, mailbox: mailbox)
        sealed = SealedEndpoint(env: env, authenticator: authenticator, database: database, mailbox: mailbox)
        settings = SettingsEndpoint(env: env, authenticator: authenticator, database: database)
        timeline = TimelineEndpoint(env: env, authenticator: authenticator, database: database)
        heads = RequestHeads(listener: gateListener)
        webSocket = WebSocketEndpoint(env: env, hub: hub, authenticator: authenticator, turn: turn, robotHTTP: robotHTTP, heads: heads,
                                      io: webSocketIO, stop: stop, onAppAttached: { [unowned push] in push.appConnected($0) })
        store = StoreSync(env: env, hub: hub, authenticator: authenticator, turn: turn, webSocket: webSocket, push: push,
                          missionRuns: missionRuns, served: served, settings: robotSettings,
                          timeline: timelineRecorder, onReady: hooks.ready)
        let lingering = GateLingering(largestBody: Route.BodyLimit.largest(env.configuration))
        // `/metrics`: every component reports its own series.
        let metrics = MetricsEndpoint(registry: env.metrics.registry,
                                      reporters: [env, hub, authenticator, database, cluster, turn, lingering,
                                                  robotHTTP, push, missionRuns, missionRuns.sender, served, robotSettings, timelineRecorder, timeline, store, stop, env.audit.writer,
                                                  workers.monitor, workers.turnCutter, workers.retention])
        router = Router(env: env, handlers: .init(authenticator: authenticator, store: store, stop: stop, metrics: metrics,
                                                  turn: turn, robotHTTP: robotHTTP, pairing: pairing, state: state,
                                                  push: PushEndpoint(env: env, authenticator: authenticator, database: database, push: push),
                                                  liveActivity: LiveActivityEndpoint(authenticator: authenticator, database: database, push: push),
                                                  household: household, sealed: sealed, settings: settings, timeline: timeline, database: database,
                                                  cluster: cluster))
        let gateRequests = GateRequests(env: env, router: router, authenticator: authenticator, database: database, robotHTTP: robotHTTP)
        self.gateRequests = gateRequests
        gate = gateListener.map {
            HTTPGate(io: $0, clock: env.clock, handler: gateRequests, lingering: lingering,
                     deferredTimeoutSeconds: Int32(max(30, env.configuration.robotHTTPTimeoutSeconds.rounded(.up) + 5)))
        }
        events = ServiceEvents(env: env, mailbox: mailbox, stop: stop, store: store, database: database, cluster: cluster, push: push,
                               missionRuns: missionRuns, settings: robotSettings, timeline: timelineRecorder, reloadTLS: reloadTLS)
        dispatch = LWSDispatch(env: env, heads: heads, router: router, database: database, robotHTTP: robotHTTP, webSocket: webSocket,
                               gate: gate, events: events, acceptedTCP: lwsAcceptedTCP)
        hubReports = HubReports(env: env, cluster: cluster, served: served, missionRuns: missionRuns, robotHTTP: robotHTTP, push: push,
                                settings: robotSettings, timeline: timelineRecorder)
        // The one link made after construction: the hub reports to components that are built on
        // the hub (each of them holds it), so one of the two must be told of the other later.
        hub.observer = hubReports
    }

    /// Once a second: housekeeping that is not per session.
    func tick(now: UInt64) {
        turn.sweep(now: now)
        robotHTTP.sweep(now: now)
        pairing.sweep(now: now)
        household.sweep(now: now)
        sealed.sweep(now: now)
        settings.sweep(now: now)
        robotSettings.tick()
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
        timelineRecorder.tick(now: env.clock.monotonic())
    }
}

/// The hub's reports, each handed to the component it concerns: the one place the hub is wired.
final class HubReports: DeviceHubObserver {
    private let env: RelayEnvironment
    private let cluster: ClusterCoordinator
    private let served: ServedDevices
    private let missionRuns: MissionRuns
    private let robotHTTP: RobotHTTPEndpoint
    private let push: PushCoordinator
    private let settings: RobotSettings
    private let timeline: TimelineRecorder

    init(env: RelayEnvironment, cluster: ClusterCoordinator, served: ServedDevices, missionRuns: MissionRuns,
         robotHTTP: RobotHTTPEndpoint, push: PushCoordinator, settings: RobotSettings, timeline: TimelineRecorder) {
        (self.env, self.cluster, self.served, self.missionRuns, self.robotHTTP, self.push) = (env, cluster, served, missionRuns, robotHTTP, push)
        (self.settings, self.timeline) = (settings, timeline)
    }

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
        settings.presenceChanged(device)
        timeline.presenceChanged(device, robotLeftAt: robotLeftAt)
    }
    func hubSettingsApplied(_ device: DeviceID, _ frame: Payload) { settings.applied(device, frame) }
    func hubTimelineEntry(_ device: DeviceID, name: String, _ frame: Payload) { timeline.robotFrame(device, name: name, frame) }
    func hubMissionSignal(_ device: DeviceID, _ signal: MissionSignal) { missionRuns.signal(device, signal) }
    func hubRobotAnsweredHTTP(_ frame: Payload, from robot: Session) { robotHTTP.answered(frame, from: robot) }
    func hubPushEvent(_ device: DeviceID, kind: PushKind, message: Payload, place: (epoch: String, seq: UInt64)) {
        push.robotEvent(device, kind, message, place)
    }
}

/// The plain-HTTP front door's requests (`HTTPGate`): every one through the router, answers logged.
final class GateRequests: HTTPGateHandler {
    private let env: RelayEnvironment
    private let router: Router
    private let authenticator: Authenticator
    private let database: DatabaseExchanges
    private let robotHTTP: RobotHTTPEndpoint

    init(env: RelayEnvironment, router: Router, authenticator: Authenticator, database: DatabaseExchanges, robotHTTP: RobotHTTPEndpoint) {
        (self.env, self.router, self.authenticator, self.database, self.robotHTTP) = (env, router, authenticator, database, robotHTTP)
    }

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
