import RelayCore
import RelayPush
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
