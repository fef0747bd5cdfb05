import RelayCore
import RelayPush
import RelayStore
import RelayWorkers

/// What other threads tell the service thread.
enum ServiceEvent: Sendable {
    case store(StoreEvent)
    case stop
    /// Re-read the TLS certificate and key (SIGHUP); live connections keep their sessions.
    case reloadTLS
    /// The database worker finished deferred request `id`.
    case databaseAnswer(UInt64, HTTPResponse)
    case cluster(ClusterEvent)
    case push(PushEvent)
    case missionRun(MissionRunEvent)
    /// What APNs answered to a Live Activity request.
    case liveActivityOutcome(LiveActivityOutcome)
    /// The robot's settings: a document read, a report not stored (v1.6).
    case settings(SettingsEvent)
    /// A timeline batch stored, or not (v1.6).
    case timeline(TimelineEvent)
}

/// Events other threads hand to the service thread. Posting is thread-safe; the service
/// thread drains everything at once in `LWS_CALLBACK_EVENT_WAIT_CANCELLED` (wakes coalesce).
final class Mailbox<Event: Sendable>: Sendable {
    private let pending = Locked<[Event]>([])
    private let wake: @Sendable () -> Void

    /// `wake` must be safe from any thread: `lws_cancel_service`.
    init(wake: @escaping @Sendable () -> Void) { self.wake = wake }

    func post(_ event: Event) {
        pending.withLock { $0.append(event) }
        wake()
    }

    func drain() -> [Event] {
        pending.withLock { events in
            defer { events.removeAll(keepingCapacity: true) }
            return events
        }
    }
}

extension Mailbox<ServiceEvent> {
    /// From a database job that changed tokens (`ids`), once the change has committed: how they
    /// stand now, read on `db`. The service thread takes this before the job's answer, and before
    /// the answer of any later job (the one database worker runs them in order), so this node
    /// refuses a revoked token from its next request on, not only once the store's notification
    /// arrives (which is what the other nodes go by).
    func postTokensChanged(_ ids: some Sequence<Int64>, readOn db: PGConnection) throws {
        let tokens = TokenRepository(db)
        for id in ids { post(.store(.tokenChanged(id: id, entry: try tokens.credential(id: id)))) }
    }
}
