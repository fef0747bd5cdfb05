import RelayCore

/// The events other threads post (the mailbox), each handed on the service thread to the
/// component it concerns (`LWS_CALLBACK_EVENT_WAIT_CANCELLED`).
final class ServiceEvents {
    private let env: RelayEnvironment
    private let mailbox: Mailbox<ServiceEvent>
    private let stop: StopSequence
    private let store: StoreSync
    private let database: DatabaseExchanges
    private let cluster: ClusterCoordinator
    private let push: PushCoordinator
    private let missionRuns: MissionRuns
    private let settings: RobotSettings
    private let timeline: TimelineRecorder
    /// Re-reads the TLS certificate and key (SIGHUP; the loop's).
    private let reloadTLS: () -> Void

    init(env: RelayEnvironment, mailbox: Mailbox<ServiceEvent>, stop: StopSequence, store: StoreSync, database: DatabaseExchanges,
         cluster: ClusterCoordinator, push: PushCoordinator, missionRuns: MissionRuns, settings: RobotSettings,
         timeline: TimelineRecorder, reloadTLS: @escaping () -> Void) {
        self.timeline = timeline
        (self.env, self.mailbox, self.stop, self.store, self.database) = (env, mailbox, stop, store, database)
        (self.cluster, self.push, self.missionRuns, self.settings, self.reloadTLS) = (cluster, push, missionRuns, settings, reloadTLS)
    }

    /// Every event posted since the last drain.
    func drain() {
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
        case .settings(let settingsEvent): settings.handle(settingsEvent)
        case .timeline(let timelineEvent): timeline.handle(timelineEvent)
        }
    }
}
