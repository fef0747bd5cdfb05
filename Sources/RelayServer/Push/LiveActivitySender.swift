import RelayCore
import RelayPush
import RelayStore
import WimzProtocol

/// What the relay sends for mission runs (docs/protocol.md v1.4 "What the relay sends"), on the
/// service thread: which token gets a start, an update or an end, at which priority and
/// timestamp (`LiveActivityPlanner`), local first per app token, the catch-up when an app's last
/// socket closes, and APNs's answers. The sending is `APNsSender`'s, on its own threads.
final class LiveActivitySender {
    private let env: RelayEnvironment
    private let hub: DeviceHub
    private let database: DatabaseExchanges
    private let apns: APNsSender?
    private var planner: LiveActivityPlanner
    /// Requests waiting for a retry after APNs said wait (starts and ends; updates are re-planned).
    private var retries: [(request: LiveActivityRequest, at: UInt64, delay: Double)] = []
    /// The next retry delay of an update APNs asked to wait with (doubling to 60 s; reset when one goes through).
    private var updateDelays: [LiveActivityPlanner.Key: Double] = [:]
    /// Activities with a request in flight: the next waits for its answer, so requests to one
    /// activity arrive in order (HTTP/2 streams may overtake each other) and the newest is last.
    private var inFlight: Set<LiveActivityPlanner.Key> = []
    /// Ends waiting for an update in flight to the same activity.
    private var waitingEnds: [LiveActivityPlanner.Key: LiveActivityRequest] = [:]
    /// Outcomes by event, priority and result, for `/metrics`.
    struct OutcomeKey: Hashable, Comparable {
        var event: String, priority: Int, result: String
        static func < (a: Self, b: Self) -> Bool { (a.event, a.priority, a.result) < (b.event, b.priority, b.result) }
    }
    private(set) var outcomes: [OutcomeKey: Int] = [:]

    init(env: RelayEnvironment, hub: DeviceHub, database: DatabaseExchanges, apns: APNsSender?) {
        self.env = env
        self.hub = hub
        self.database = database
        self.apns = apns
        let configuration = env.configuration
        planner = LiveActivityPlanner(interval: UInt64(configuration.liveActivityIntervalSeconds * 1e9),
                                      alertsPerHour: configuration.liveActivityAlertsPerHour)
    }

    /// The run of `device` changed (`timestamp`: when the relay got what changed it).
    func changed(_ device: DeviceID, _ change: MissionRunChange, timestamp: Int64, tokens: [LiveActivityRegistration], robotName: String) {
        guard apns != nil else { return }
        let local = localAppTokens(device)
        let now = env.clock.monotonic()
        switch change {
        case .began(let state):
            // A run begins once: one start per app token and run.
            let holding = Set(tokens.filter { $0.activityID != nil }.map(\.appTokenID))
            for start in tokens where start.activityID == nil && !local.contains(start.appTokenID) && !holding.contains(start.appTokenID) {
                send(LiveActivityRequest(device: device, appTokenID: start.appTokenID, activity: nil, token: start.token,
                                         environment: start.environment, event: .start, priority: 10, timestamp: timestamp,
                                         state: state, robotName: robotName))
            }
            update(device, state, timestamp: timestamp, tokens: tokens, local: local, now: now)
        case .changed(let state, _):
            update(device, state, timestamp: timestamp, tokens: tokens, local: local, now: now)
        case .ended(let state, let reason):
            for activity in tokens {
                guard let id = activity.activityID else { continue }
                let key = LiveActivityPlanner.Key(device: device, appTokenID: activity.appTokenID, activity: id)
                let end = LiveActivityRequest(device: device, appTokenID: activity.appTokenID, activity: id, token: activity.token,
                                              environment: activity.environment, event: .end, priority: 10,
                                              timestamp: planner.stamp(key, timestamp), state: state, ended: reason)
                if inFlight.contains(key) { waitingEnds[key] = end } else { send(end) }
            }
            planner.forget(device: device)
            forgetEnded(device, tokens.filter { $0.activityID != nil })
        }
    }

    /// Each activity of an app token with no socket here gets `state` as the update rules say.
    private func update(_ device: DeviceID, _ state: MissionState, timestamp: Int64, tokens: [LiveActivityRegistration],
                        local: Set<Int64>, now: UInt64) {
        for activity in tokens where !local.contains(activity.appTokenID) {
            guard let id = activity.activityID else { continue }
            let key = LiveActivityPlanner.Key(device: device, appTokenID: activity.appTokenID, activity: id)
            guard case .sendNow(let priority) = planner.decide(key, status: state.status, now: now) else { continue }
            if inFlight.contains(key) {
                planner.schedule(key, at: now, now: now)  // right after the answer (the next tick)
            } else {
                sendUpdate(key, activity, state, timestamp: timestamp, priority: priority, now: now)
            }
        }
    }

    private func sendUpdate(_ key: LiveActivityPlanner.Key, _ activity: LiveActivityRegistration, _ state: MissionState,
                            timestamp: Int64, priority: Int, now: UInt64) {
        let stamped = planner.sent(key, status: state.status, timestamp: timestamp, priority: priority, now: now)
        send(LiveActivityRequest(device: key.device, appTokenID: key.appTokenID, activity: key.activity, token: activity.token,
                                 environment: activity.environment, event: .update, priority: priority, timestamp: stamped,
                                 state: state))
    }

    /// The last socket of `appTokenID` on `device` closed: its activities get the current state
    /// within the next tick (the catch-up), if a run is open.
    func appLeft(_ device: DeviceID, appTokenID: Int64, tokens: [LiveActivityRegistration], runOpen: Bool) {
        guard apns != nil, runOpen, !localAppTokens(device).contains(appTokenID) else { return }
        let now = env.clock.monotonic()
        for activity in tokens where activity.appTokenID == appTokenID {
            guard let id = activity.activityID else { continue }
            planner.schedule(.init(device: device, appTokenID: appTokenID, activity: id), at: now, now: now)
        }
    }

    /// Once a second: coalesced updates whose interval passed (the newest state), retries due.
    func tick(now: UInt64, current: (DeviceID) -> (state: MissionState, timestamp: Int64, tokens: [LiveActivityRegistration])?) {
        guard apns != nil else { return }
        for key in planner.due(now: now) where !inFlight.contains(key) {
            guard let run = current(key.device),
                  let activity = run.tokens.first(where: { $0.appTokenID == key.appTokenID && $0.activityID == key.activity }) else {
                planner.forget(key)
                continue
            }
            if localAppTokens(key.device).contains(key.appTokenID) {
                planner.cancelPending(key)
                continue
            }
            if isStale(timestamp: run.timestamp) {
                planner.cancelPending(key)  // the lock screen already shows it stale; the next change goes
                continue
            }
            let priority = if case .sendNow(let p) = planner.decide(key, status: run.state.status, now: now) { p } else { 5 }
            sendUpdate(key, activity, run.state, timestamp: run.timestamp, priority: priority, now: now)
        }
        let due = retries.filter { $0.at <= now }
        retries.removeAll { $0.at <= now }
        for retry in due where !isStale(timestamp: retry.request.timestamp) {
            send(retry.request, retryDelay: retry.delay)
        }
    }

    private func isStale(timestamp: Int64) -> Bool {
        env.clock.wall().seconds - timestamp > Int64(env.configuration.liveActivityStaleAfter)
    }

    private func localAppTokens(_ device: DeviceID) -> Set<Int64> { Set(hub.apps(of: device).map(\.tokenID)) }

    private func send(_ request: LiveActivityRequest, retryDelay: Double = 1) {
        if let id = request.activity { inFlight.insert(.init(device: request.device, appTokenID: request.appTokenID, activity: id)) }
        let configuration = env.configuration
        apns?.enqueue(LiveActivityPush(request: request, body: request.body(staleAfter: configuration.liveActivityStaleAfter,
                                                                              dismissAfter: configuration.liveActivityDismissAfter),
                                       retryDelay: retryDelay),
                      now: env.clock.monotonic())
    }

    /// Ended activities are forgotten (the app may register new ones).
    private func forgetEnded(_ device: DeviceID, _ activities: [LiveActivityRegistration]) {
        guard !activities.isEmpty else { return }
        database.worker.submit({ db in
            let repository = LiveActivityRepository(db)
            for activity in activities {
                try repository.remove(device: device, appTokenID: activity.appTokenID, activity: activity.activityID, reason: "ended")
            }
        }, failed: { _ in })
    }

    /// What APNs answered.
    func handle(_ outcome: LiveActivityOutcome) {
        let request = outcome.push.request
        let key = request.activity.map { LiveActivityPlanner.Key(device: request.device, appTokenID: request.appTokenID, activity: $0) }
        if let key {
            inFlight.remove(key)
            if outcome.result != .unregistered, let end = waitingEnds.removeValue(forKey: key) { send(end) }
        }
        outcomes[OutcomeKey(event: request.event.rawValue, priority: request.priority, result: outcome.result.rawValue), default: 0] += 1
        if outcome.result != .queueFull { env.metrics.pushSeconds.record(outcome.latency) }
        switch outcome.result {
        case .delivered, .rejected, .providerAuth, .queueFull:
            if let key { updateDelays[key] = nil }
        case .unregistered:
            if let key {
                planner.forget(key)
                waitingEnds[key] = nil
            }
            let device = request.device, appToken = request.appTokenID, activity = request.activity
            database.worker.submit({ db in
                try LiveActivityRepository(db).remove(device: device, appTokenID: appToken, activity: activity, reason: "unregistered")
            }, failed: { _ in })
        case .throttled:
            let now = env.clock.monotonic()
            if request.event == .update, let key {
                // The retry carries the newest state when it goes: the planner sends the current one.
                let delay = updateDelays[key] ?? 1
                updateDelays[key] = min(delay * 2, 60)
                planner.schedule(key, at: now + UInt64(delay * 1e9), now: now)
            } else {
                let delay = outcome.push.retryDelay
                retries.append((request, now + UInt64(delay * 1e9), min(delay * 2, 60)))
            }
        }
    }
}

extension LiveActivitySender: MetricsReporting {
    func report(to metrics: MetricsSink) {
        for (key, n) in outcomes.sorted(by: { $0.key < $1.key }) {
            metrics.counter("wimz_live_activity_requests_total",
                            "Live Activity requests to APNs by event, priority and what became of them.",
                            [("event", key.event), ("priority", String(key.priority)), ("result", key.result)], n)
        }
    }
}
