import RelayCore

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
