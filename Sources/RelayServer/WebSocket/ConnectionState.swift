extension Connection {
    /// Where a connection is between lws's ESTABLISHED and CLOSED. It changes only through the
    /// transitions below, each of which returns what the endpoint must do; a transition that
    /// cannot happen from the current state trips an assertion in debug builds and does nothing
    /// in release ones.
    ///
    /// `corked`: the gate corked the socket it handed to lws (`GateListener.adopt`), so the 101
    /// may still wait in the kernel for the first message to join it; the first write lets it
    /// out (`Uncork`). Where lws serves TLS itself nothing is corked and that costs one idle
    /// `setsockopt`.
    enum State: Equatable {
        /// ESTABLISHED is being handled: the first messages are written as it returns
        /// (`WebSocketEndpoint.writeFirstMessages`), so no WRITEABLE is asked for meanwhile.
        case opening
        /// Routed: a write is asked for when its queue gets a message.
        case open(corked: Bool)
        /// Its close is decided (`Session.closing`): it waits in the close watch to be let out.
        case closeWaiting(corked: Bool)
        /// The close frame was let out (WRITEABLE returned -1 for it): the socket lingers until
        /// lws reports it closed.
        case closeLetOut
        /// lws reported CLOSED: the `wsi` is gone.
        case finished

        /// Whether the 101 must be let out after this write.
        enum Uncork: Equatable { case no, yes }

        /// What `Connection.requestWrite` does.
        enum WriteRequest: Equatable {
            /// Nothing: the first messages are about to be written, or the close already waits.
            case none
            /// Ask lws for a WRITEABLE.
            case askWritable
            /// Hand the connection to the close watch, which lets closes out a few at a time.
            case watchClose
        }

        /// What a WRITEABLE does.
        enum Write: Equatable {
            /// Frame and write what is queued, then uncork if told.
            case drain(Uncork)
            /// Set the close frame and return -1 (lws sends it), uncorking first if told.
            case sendClose(Uncork)
        }

        /// ESTABLISHED was handled: the connection is routed (its first messages may have been
        /// written straight after the 101, see `wroteDirectly`).
        mutating func opened() {
            guard case .opening = self else { return illegal("opened") }
            self = .open(corked: true)
        }

        /// A write is wanted (a message was queued, a ping is due, or the close was decided:
        /// `closing`).
        @inline(__always)
        mutating func writeRequested(closing: Bool) -> WriteRequest {
            // The case of every message queued: one comparison, nothing changes.
            if case .open = self, !closing { return .askWritable }
            switch self {
            case .opening, .closeWaiting, .closeLetOut:
                return .none
            case .open(let corked):  // closing: the rest took the fast path above
                self = .closeWaiting(corked: corked)
                return .watchClose
            case .finished:
                illegal("a write requested")
                return .none
            }
        }

        /// Bytes were written straight to the socket, outside a WRITEABLE.
        mutating func wroteDirectly() -> Uncork {
            guard case .open(let corked) = self else {
                illegal("a direct write")
                return .no
            }
            self = .open(corked: false)
            return corked ? .yes : .no
        }

        /// lws offers a write; `closing`: the session's close was decided.
        @inline(__always)
        mutating func writeable(closing: Bool) -> Write {
            // The case of every write after the first: one comparison, nothing changes.
            if case .open(corked: false) = self, !closing { return .drain(.no) }
            switch self {
            case .open(let corked) where !closing:
                self = .open(corked: false)
                return .drain(corked ? .yes : .no)
            case .open(let corked), .closeWaiting(let corked):
                self = .closeLetOut
                return .sendClose(corked ? .yes : .no)
            case .closeLetOut:
                // lws does not offer another write after the -1; should it, the close is set again.
                return .sendClose(.no)
            case .opening, .finished:
                illegal("a WRITEABLE")
                return .sendClose(.no)
            }
        }

        /// lws reported CLOSED. Returns whether the socket lingers (our close frame was let out).
        mutating func closed() -> Bool {
            if case .finished = self { illegal("a second CLOSED") }
            let lingers = self == .closeLetOut
            self = .finished
            return lingers
        }

        /// Whether the close watch has yet to let this connection's close out.
        var awaitsCloseRelease: Bool {
            if case .closeWaiting = self { true } else { false }
        }

        var isFinished: Bool { self == .finished }

        private func illegal(_ transition: StaticString) {
            assertionFailure("\(transition) in connection state \(self)")
        }
    }
}
