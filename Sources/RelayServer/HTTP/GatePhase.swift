import RelayCore

/// A plain request the relay admitted from its head (routed, its caller checked): what the gate
/// hands back with the body.
struct AdmittedRequest {
    let request: HTTPRequest
    let routed: Router.Routed
}

/// Where a gate connection is between accept and close (`HTTPGate`). It changes only through the
/// transitions below, each of which returns what the gate does next; the gate does the reading
/// and writing. A transition that cannot happen from the current phase trips an assertion in
/// debug builds, and has the connection closed in release ones.
enum GatePhase {
    /// Reading the request head (its 10 s deadline runs).
    case readingHead
    /// A complete head waiting for its token (`HTTPGateHandler.awaitCredential`); the socket is
    /// not read.
    case awaitingCredential(HTTPRequestHead)
    /// Admitted: reading the `length` bytes of its body (the request deadline still runs).
    case readingBody(AdmittedRequest, length: Int)
    /// Routed; the answer comes through `HTTPGate.respond(_:with:)` (its own, longer timeout).
    case deferred
    /// Writing the answer, then closing or lingering.
    case answering(then: AfterAnswer)
    /// The answer is out and writes are shut: what the client still sends is read and dropped
    /// until it closes, `budget` bytes are dropped or the linger's time is up.
    case lingering(budget: Int)

    /// What follows a written answer.
    enum AfterAnswer: Equatable {
        /// The request was read whole: close.
        case close
        /// The answer came early, with request bytes maybe still on their way: linger, dropping
        /// at most `budget` more bytes.
        case linger(budget: Int)
    }

    /// What the gate does when the socket has bytes to read.
    enum Read {
        case readHead
        case readBody(AdmittedRequest, length: Int)
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
        case .readingBody(let admitted, let length): .readBody(admitted, length: length)
        case .awaitingCredential, .deferred: .leave
        case .answering(.linger(let budget)), .lingering(let budget): budget > 0 ? .drop(budget: budget) : .pauseReading
        case .answering(.close): .pauseReading
        }
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
        case .ready: return .proceed(head)
        case .waiting:
            self = .awaitingCredential(head)
            return .pauseReading
        case .refused(let error): return .answerEarly(error)
        }
    }

    /// The waiting head's token is in memory, or its wait ended: the head to proceed with (its
    /// socket read again unless it is an upgrade, which lws reads), nil when none waits (a
    /// wake-up for a connection that moved on or closed).
    mutating func credentialArrived() -> HTTPRequestHead? {
        guard case .awaitingCredential(let head) = self else { return nil }
        self = .readingHead
        return head
    }

    /// The route admitted the request with a body of `length` bytes (> 0) to read.
    mutating func admitted(_ request: AdmittedRequest, length: Int) {
        guard case .readingHead = self else { return illegal("an admission", ()) }
        self = .readingBody(request, length: length)
    }

    /// The whole request is in and its answer comes later: the socket is not read meanwhile and
    /// closes after the deferred timeout.
    mutating func deferred() {
        switch self {
        case .readingHead, .readingBody: self = .deferred
        default: illegal("a deferral", ())
        }
    }

    /// An answer is to be written. A deferred one comes only while deferred (nil otherwise: its
    /// connection moved on); any other from a phase that reads the request.
    mutating func answer(then: AfterAnswer, deferred: Bool = false) -> AfterAnswer? {
        switch self {
        case .deferred: break
        case .readingHead, .awaitingCredential, .readingBody: guard !deferred else { return nil }
        case .answering, .lingering:
            guard !deferred else { return nil }
            return illegal("a second answer", nil)
        }
        self = .answering(then: then)
        return then
    }

    /// What follows the last byte of the answer.
    enum Written {
        case close
        /// Shut writes (a FIN after the answer) and keep reading and dropping.
        case linger
    }

    mutating func answerWritten() -> Written {
        guard case .answering(let then) = self else { return illegal("an answer written", .close) }
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
        case .answering(.linger(let budget)):
            let left = count.map { max(0, budget - $0) } ?? 0
            self = .answering(then: .linger(budget: left))
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
        case .awaitingCredential, .deferred, .answering, .lingering: false
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
