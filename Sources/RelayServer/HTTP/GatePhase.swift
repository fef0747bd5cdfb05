import RelayCore

/// A plain request the relay admitted from its head (routed, its caller checked): what the gate
/// hands back with the body.
struct AdmittedRequest {
    let request: HTTPRequest
    let routed: Router.Routed
}

/// Where a gate connection is between accept and close (`HTTPGate`), with the data of that phase
/// and no other: the head's bytes while it is read, the body's while that is read, the answer's
/// while it is written. It changes only through the transitions below, each of which returns
/// what the gate does next; the gate does the reading and writing. A transition that cannot
/// happen from the current phase trips an assertion in debug builds, and has the connection
/// closed in release ones.
enum GatePhase {
    /// Reading the request head: its bytes so far (its 10 s deadline runs).
    case readingHead(received: [UInt8])
    /// A complete head waiting for its token (`HTTPGateHandler.awaitCredential`); the socket is
    /// not read.
    case awaitingCredential(HTTPRequestHead)
    /// A complete head, its token in memory, being routed and admitted: a step within one
    /// callback, never seen by a read.
    case routing
    /// Admitted: reading the `length` bytes of its body, `received` so far (the request deadline
    /// still runs).
    case readingBody(AdmittedRequest, length: Int, received: [UInt8])
    /// Routed; the answer comes through `HTTPGate.respond(_:with:)` (its own, longer timeout).
    case deferred
    /// Writing the answer (`pending`: what is still to go), then closing or lingering.
    case answering(pending: ArraySlice<UInt8>, then: AfterAnswer)
    /// The answer is out and writes are shut: what the client still sends is read and dropped
    /// until it closes, `budget` bytes are dropped or the linger's time is up.
    case lingering(budget: Int)

    /// A connection just accepted.
    static var accepted: GatePhase { .readingHead(received: []) }

    /// What follows a written answer.
    enum AfterAnswer: Equatable {
        /// The request was read whole (or may not linger): close.
        case close
        /// The answer came early, with request bytes maybe still on their way: linger, dropping
        /// at most `budget` more bytes.
        case linger(budget: Int)
    }

    /// What the gate does when the socket has bytes to read.
    enum Read: Equatable {
        case readHead
        /// Read at most `wanted` more bytes of the body (`bodyArrived(_:)` follows).
        case readBody(wanted: Int)
        /// Nothing now: it waits for its token, or for its deferred answer.
        case leave
        /// Read and drop at most `budget` bytes (`dropped(_:)` follows).
        case drop(budget: Int)
        /// Stop polling the socket (what comes is not ours to read, or no more is wanted); it
        /// closes once the answer is out.
        case pauseReading
    }

    var onReadable: Read {
        switch self {
        case .readingHead: .readHead
        case .readingBody(_, let length, let received): .readBody(wanted: length - received.count)
        case .awaitingCredential, .routing, .deferred: .leave
        case .answering(_, .linger(let budget)), .lingering(let budget): budget > 0 ? .drop(budget: budget) : .pauseReading
        case .answering(_, .close): .pauseReading
        }
    }

    /// More of the head arrived: all of it so far, to parse (empty outside `readingHead`).
    mutating func headArrived(_ bytes: UnsafeRawBufferPointer) -> [UInt8] {
        guard case .readingHead(var received) = self else { return illegal("head bytes", []) }
        self = .routing  // `received` is the only reference now: the append does not copy it
        received += bytes
        self = .readingHead(received: received)
        return received
    }

    /// What a complete head leads to, its token asked for (`wait`).
    enum HeadRead {
        /// Its token is in memory (or it presents none): proceed with it now.
        case proceed(HTTPRequestHead)
        /// Its token is being read: stop polling the socket until `credentialArrived`.
        case pauseReading
        /// Refused before anything else was read (the address's failure limit, too many waiting).
        case answerEarly(RelayError)
    }

    mutating func headRead(_ head: HTTPRequestHead, wait: CredentialWait) -> HeadRead {
        guard case .readingHead = self else { return illegal("a head read", .answerEarly(RelayError(.internalError, "gate state"))) }
        switch wait {
        case .ready:
            self = .routing
            return .proceed(head)
        case .waiting:
            self = .awaitingCredential(head)
            return .pauseReading
        case .refused(let error):
            self = .routing
            return .answerEarly(error)
        }
    }

    /// The waiting head's token is in memory, or its wait ended: the head to proceed with (its
    /// socket read again unless it is an upgrade, which lws reads), nil when none waits (a
    /// wake-up for a connection that moved on or closed).
    mutating func credentialArrived() -> HTTPRequestHead? {
        guard case .awaitingCredential(let head) = self else { return nil }
        self = .routing
        return head
    }

    /// The route admitted the request with a body of `length` bytes (> 0) to read.
    mutating func admitted(_ request: AdmittedRequest, length: Int) {
        guard case .routing = self else { return illegal("an admission", ()) }
        self = .readingBody(request, length: length, received: [])
    }

    /// Bytes of the body arrived: the request and its whole body once all of it is in (the phase
    /// is then `routing` again), nil while more is to come.
    mutating func bodyArrived(_ bytes: UnsafeRawBufferPointer) -> (AdmittedRequest, body: [UInt8])? {
        guard case .readingBody(let admitted, let length, var received) = self else { return illegal("body bytes", nil) }
        self = .routing  // as in `headArrived`: no copy
        received += bytes
        if received.count >= length { return (admitted, received) }
        self = .readingBody(admitted, length: length, received: received)
        return nil
    }

    /// The whole request is in and its answer comes later: the socket is not read meanwhile and
    /// closes after the deferred timeout.
    mutating func deferred() {
        guard case .routing = self else { return illegal("a deferral", ()) }
        self = .deferred
    }

    /// `answer` is to be written. A deferred one comes only while deferred (false otherwise: its
    /// connection moved on); any other from a phase that reads the request.
    mutating func answer(_ answer: [UInt8], then: AfterAnswer, deferred: Bool = false) -> Bool {
        switch self {
        case .deferred: break
        case .readingHead, .awaitingCredential, .routing, .readingBody: guard !deferred else { return false }
        case .answering, .lingering:
            guard !deferred else { return false }
            return illegal("a second answer", false)
        }
        self = .answering(pending: answer[...], then: then)
        return true
    }

    /// What of the answer is still to be written (nil outside `answering`).
    var pendingAnswer: ArraySlice<UInt8>? {
        guard case .answering(let pending, _) = self else { return nil }
        return pending
    }

    /// `count` bytes of the answer went out.
    mutating func wrote(_ count: Int) {
        guard case .answering(let pending, let then) = self else { return illegal("an answer's bytes written", ()) }
        self = .answering(pending: pending.dropFirst(count), then: then)
    }

    /// What follows the last byte of the answer.
    enum Written {
        case close
        /// Shut writes (a FIN after the answer) and keep reading and dropping.
        case linger
    }

    mutating func answerWritten() -> Written {
        guard case .answering(_, let then) = self else { return illegal("an answer written", .close) }
        guard case .linger(let budget) = then, budget > 0 else { return .close }  // nothing (left) to arrive
        self = .lingering(budget: budget)
        return .linger
    }

    /// What follows bytes dropped while the answer goes out or after it.
    enum Dropped {
        case keepReading
        /// All that may arrive is in while the answer is still going out: stop polling; the
        /// connection closes once the answer is out.
        case pauseReading
        case close
    }

    /// `count` bytes were read and dropped; nil: the client closed its side (it sends no more).
    mutating func dropped(_ count: Int?) -> Dropped {
        switch self {
        case .answering(let pending, .linger(let budget)):
            let left = count.map { max(0, budget - $0) } ?? 0
            self = .answering(pending: pending, then: .linger(budget: left))
            return left > 0 ? .keepReading : .pauseReading
        case .lingering(let budget):
            let left = count.map { max(0, budget - $0) } ?? 0
            self = .lingering(budget: left)
            return left > 0 ? .keepReading : .close
        default:
            return illegal("bytes dropped", .close)
        }
    }

    /// Whether the request deadline (slow-loris) closes the connection: only while the client
    /// still owes its request; other phases are bounded otherwise.
    var owesItsRequest: Bool {
        switch self {
        case .readingHead, .readingBody: true
        case .awaitingCredential, .routing, .deferred, .answering, .lingering: false
        }
    }

    private func illegal<T>(_ transition: StaticString, _ fallback: T) -> T {
        assertionFailure("\(transition) in gate phase \(self)")
        return fallback
    }
}

extension HTTPRequestHead {
    /// Where a complete head goes, from the head alone: an upgrade to lws, a plain request with
    /// its body's length to the router, or a refusal of the gate's own.
    enum GateRoute: Equatable {
        case upgrade
        case plain(contentLength: Int)
        case refuse(RelayError)
    }

    var gateRoute: GateRoute {
        if isWebSocketUpgrade {
            return method == "GET" ? .upgrade : .refuse(RelayError(.badRequest, "a WebSocket upgrade is a GET"))
        }
        if header("transfer-encoding") != nil { return .refuse(RelayError(.lengthRequired, "send the body with Content-Length")) }
        guard let length = Int(header("content-length") ?? "0"), length >= 0 else {
            return .refuse(RelayError(.badRequest, "Content-Length is not a number"))
        }
        return .plain(contentLength: length)
    }
}
