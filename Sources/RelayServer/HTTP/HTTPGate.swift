#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif
import RelayCore

/// The relay's front door for plain HTTP: it reads each connection's request head itself and
/// parses it with ``HTTPRequestHead`` (exact bytes, strict rules, size limits), and answers what
/// is malformed with a real status and JSON body. WebSocket upgrades go on to lws with a
/// canonical head (`GET / HTTP/1.1` and only the headers lws needs); every other request the
/// gate serves itself — body, routing through the server, response — one request per connection
/// (`Connection: close`). Its sockets are ``GateIO``'s (``GateListener`` in the daemon); the gate
/// is the request's state machine, service thread only.
///
/// Why: lws 4.1.6 decodes the request target while it parses it — `;` splits arguments, a
/// decoded CR ends the request line, `%00` and an over-long head drop the connection without
/// an answer — so what it reports is not always what was sent. (And a request body handed to
/// lws through the adoption buffer makes 4.1.6 repeat its body-completion callback forever.)
///
/// Not with TLS served by lws itself (`WIMZ_TLS_CERT`): the gate cannot read ciphertext, so
/// lws listens and parses, and the server rebuilds the head from what lws reports.
final class HTTPGate {
    let limits: HTTPRequestHead.Limits
    /// What serves the requests (`GateRequests`: the router and the caller's checks), built
    /// before the gate and owned with it; answers that come later reach the gate through each
    /// request's `HTTPClient`, so nothing that serves needs the gate first.
    private unowned let handler: any HTTPGateHandler
    /// Seconds a deferred request may wait for its answer before the connection is dropped.
    let deferredTimeoutSeconds: Int32
    let lingering: GateLingering

    private let io: GateIO
    /// The relay's clock: request deadlines follow it.
    private let clock: RelayClock
    /// Connections the gate serves, by their raw wsi.
    private var connections: [OpaquePointer: GateConnection] = [:]

    /// Connections that must have sent their request by a deadline (slow-loris), with the
    /// serial of the connection (lws reuses wsi addresses).
    private var requestDeadlines = DeadlineFIFO<(wsi: OpaquePointer, serial: UInt64)>()
    private var nextSerial: UInt64 = 0
    /// How long a client has to send its request.
    static let requestTimeout: UInt64 = 10_000_000_000

    /// One connection, from accept to close: its phase (`GatePhase`, whose transitions say what
    /// to do next, with the data of that phase).
    private final class GateConnection {
        let serial: UInt64
        var phase = GatePhase.accepted
        /// Whether it holds one of the lingering places (given back at close).
        var lingers = false
        init(serial: UInt64) { self.serial = serial }
    }

    /// Largest request body the gate reads unless the route says otherwise (the admin API's).
    static let bodyLimit = 64 * 1024

    init(io: GateIO, clock: RelayClock, handler: any HTTPGateHandler, lingering: GateLingering,
         limits: HTTPRequestHead.Limits = .init(), deferredTimeoutSeconds: Int32 = 30) {
        self.io = io
        self.handler = handler
        self.clock = clock
        self.limits = limits
        self.deferredTimeoutSeconds = deferredTimeoutSeconds
        self.lingering = lingering
    }

    // MARK: - Accept

    /// What accept does with a new connection, from the bytes its socket already holds
    /// (``arrival(of:peer:whenReady:)``).
    enum Arrival {
        /// Not a whole GET upgrade: the gate reads it as a raw connection (``accepted(_:peeked:)``).
        case read
        /// A whole upgrade, its token in memory (or none presented): to lws now, its head's
        /// `length` bytes read off the socket first and the client's frames left behind.
        case handOver(HTTPRequestHead, length: Int)
        /// A whole upgrade whose token is being read: `whenReady` is called once it is in (or its
        /// wait ended); the descriptor waits outside lws meanwhile, its head still in the socket.
        case waiting
        /// A whole upgrade that may not wait (an address over its failure limit, too many
        /// waiting): the gate answers `error` on a raw connection, its head's `length` bytes read
        /// off (``accepted(_:refusing:headLength:)``).
        case refuse(RelayError, length: Int)
    }

    /// The accept path's one decision, from what the socket holds at accept: a whole upgrade's
    /// head is parsed, its token hashed and its lookup asked for here, once, and the upgrade goes
    /// to lws without the gate reading it as a raw descriptor first (one lws descriptor and one
    /// close less per WebSocket: lws 4.1.6 scans its whole descriptor table on every close).
    /// Anything else — an incomplete or malformed head, a request that is not a GET upgrade — is
    /// read as usual, so its refusals happen where they always do.
    func arrival(of bytes: UnsafeRawBufferPointer, peer: () -> String,
                 whenReady: @escaping (HTTPRequestHead, _ length: Int) -> Void) -> Arrival {
        guard HTTPGate.mentionsWebSocket(bytes),  // plain requests skip a parse here: the gate's read parses them
              case .complete(var head, let length) = HTTPRequestHead.parse(bytes, limits: limits),
              head.gateRoute == .upgrade else { return .read }
        head.credential = handler.presentedCredential(in: head)
        switch handler.awaitCredential(for: head, peer: peer, then: { [head] in whenReady(head, length) }) {
        case .ready: return .handOver(head, length: length)
        case .waiting: return .waiting
        case .refused(let error): return .refuse(error, length: length)
        }
    }

    /// A connection accepted as a raw descriptor (``Arrival/read``): its request must arrive within
    /// 10 s (slow-loris, see `expire(now:)`). `peeked`, what a peek at accept found in the socket,
    /// is read at once rather than after a trip through the event loop. Returns -1 to have lws
    /// close that descriptor.
    func accepted(_ wsi: OpaquePointer, peeked: UnsafeRawBufferPointer? = nil) -> Int32 {
        let connection = track(wsi)
        guard let peeked, !peeked.isEmpty else { return 0 }
        return readHead(wsi, connection, peeked: peeked)
    }

    /// An upgrade refused at accept (``Arrival/refuse(_:length:)``): its head, parsed there, is
    /// taken off the socket and `error` answered early.
    func accepted(_ wsi: OpaquePointer, refusing error: RelayError, headLength: Int) -> Int32 {
        let connection = track(wsi)
        guard consume(wsi, headLength) else { return -1 }
        return answerEarly(wsi, connection, .error(error), unread: nil)
    }

    private func track(_ wsi: OpaquePointer) -> GateConnection {
        nextSerial += 1
        let connection = GateConnection(serial: nextSerial)
        connections[wsi] = connection
        requestDeadlines.append((wsi, nextSerial), deadline: clock.monotonic() + HTTPGate.requestTimeout)
        return connection
    }

    /// Whether `bytes` hold "websocket" in any case (an upgrade's `Upgrade` header must). Its
    /// first letter is found with `memchr` (vectorised; a byte-by-byte scan cost ~1,600
    /// instructions a request), the rest compared as a word and a byte with bit 0x20 set, which
    /// folds exactly the upper-case letters onto the lower-case ones.
    static func mentionsWebSocket(_ raw: UnsafeRawBufferPointer) -> Bool {
        guard raw.count >= 9, let base = raw.baseAddress else { return false }
        func found(startingWith first: UInt8) -> Bool {
            var from = 0
            while from <= raw.count - 9, let hit = memchr(base + from, Int32(first), raw.count - 8 - from) {
                let i = UnsafeRawPointer(hit) - base
                if raw.loadUnaligned(fromByteOffset: i, as: UInt64.self) | 0x2020_2020_2020_2020 == webSocketHead,
                   raw[i + 8] | 0x20 == UInt8(ascii: "t") { return true }
                from = i + 1
            }
            return false
        }
        return found(startingWith: UInt8(ascii: "w")) || found(startingWith: UInt8(ascii: "W"))
    }

    /// "websocke" as the word its bytes load as.
    private static let webSocketHead = UnsafeRawPointer(("websocke" as StaticString).utf8Start).loadUnaligned(as: UInt64.self)

    /// Closes connections whose request did not arrive in time (service thread, every wheel tick).
    func expire(now: UInt64) {
        for (wsi, serial) in requestDeadlines.popExpired(now: now) {
            guard let connection = connections[wsi], connection.serial == serial, connection.phase.owesItsRequest else { continue }
            io.closeSoon(wsi)
        }
    }

    // MARK: - Reading a raw connection

    /// `LWS_CALLBACK_RAW_RX_FILE` of a connection: request bytes to read. Returns -1 to have lws
    /// close that descriptor.
    func readable(_ wsi: OpaquePointer) -> Int32 {
        guard let connection = connections[wsi] else { return -1 }
        switch connection.phase.onReadable {
        case .readHead: return readHead(wsi, connection, peeked: nil)
        case .readBody(let wanted): return readBody(wsi, connection, wanted: wanted)
        case .leave: return 0
        case .drop(let budget): return drop(wsi, connection, budget: budget)
        case .pauseReading:
            // Not polled, it cannot spin the loop; the socket closes once the answer is out.
            io.pauseReading(wsi)
            return 0
        }
    }

    /// Peeks (unless `peeked` holds what a peek at accept found), then consumes only the head's
    /// bytes: the body (or, for an upgrade, the first frames) stays in the socket for whoever
    /// reads next.
    private func readHead(_ wsi: OpaquePointer, _ connection: GateConnection, peeked: UnsafeRawBufferPointer?) -> Int32 {
        let received: [UInt8], before: Int, n: Int
        if let peeked {
            before = 0
            n = peeked.count
            received = connection.phase.headArrived(peeked)
        } else {
            // On the stack, not a zero-filled array (~4,000 instructions a read).
            let peek = withUnsafeTemporaryAllocation(byteCount: 4096, alignment: 1) { chunk -> (GateIOResult, [UInt8]) in
                let result = io.peek(wsi, into: chunk)
                guard case .bytes(let count) = result else { return (result, [UInt8]()) }
                return (result, connection.phase.headArrived(UnsafeRawBufferPointer(rebasing: chunk[..<count])))
            }
            switch peek.0 {
            case .bytes(let count):
                n = count
                received = peek.1
                before = received.count - count
            case .wouldBlock: return 0
            case .ended, .failed: return -1  // closed before a whole head arrived
            }
        }
        switch HTTPRequestHead.parse(received, limits: limits) {
        case .incomplete:
            return consume(wsi, n) ? 0 : -1
        case .invalid(let error):
            // Take what was read off the socket first; the rest, if any, lingers.
            _ = consume(wsi, n)
            return refuse(wsi, connection, error, unread: nil)
        case .complete(var head, let length):
            guard consume(wsi, length - before) else { return -1 }
            head.credential = handler.presentedCredential(in: head)
            let serial = connection.serial
            let wait = handler.awaitCredential(for: head, peer: { io.peerAddress(wsi) }, then: { [weak self] in
                self?.credentialArrived(wsi, serial: serial)
            })
            switch connection.phase.headRead(head, wait: wait) {
            case .proceed(let head): return proceed(wsi, connection, head)
            case .pauseReading:
                io.pauseReading(wsi)
                return 0
            case .answerEarly(let error): return answerEarly(wsi, connection, .error(error), unread: nil)
            }
        }
    }

    /// A waiting head's token is in memory (or its wait ended): the request goes on.
    private func credentialArrived(_ wsi: OpaquePointer, serial: UInt64) {
        guard let connection = connections[wsi], connection.serial == serial,
              let head = connection.phase.credentialArrived() else { return }
        if !head.isWebSocketUpgrade { io.resumeReading(wsi) }
        if proceed(wsi, connection, head) < 0 { io.closeSoon(wsi) }
    }

    /// A complete head (its bytes consumed), its token in memory if it presented one: an upgrade
    /// goes to lws, anything else has its body read and is served.
    private func proceed(_ wsi: OpaquePointer, _ connection: GateConnection, _ head: HTTPRequestHead) -> Int32 {
        let length: Int
        switch head.gateRoute {
        case .upgrade:
            io.handOver(wsi, head: head)
            return -1  // the raw wsi goes; its duplicate lives on in lws as a WebSocket
        case .refuse(let error): return refuse(wsi, connection, error, unread: nil)
        case .plain(let contentLength): length = contentLength
        }
        // Routed and its caller checked once, from the head: only an admitted request has its body read.
        let request = HTTPRequest(client: HTTPClient(wsi, answeredBy: self), head: head, peerAddress: io.peerAddress(wsi))
        switch handler.admit(request, contentLength: length) {
        case .answer(let response):
            return length > 0 ? answerEarly(wsi, connection, response, unread: length) : answer(wsi, connection, response, then: .close)
        case .bodyTooLarge(let limit):
            return refuse(wsi, connection, RelayError(.tooLarge, "request bodies are limited to \(limit) bytes here"), unread: length)
        case .admitted(let routed):
            let admitted = AdmittedRequest(request: request, routed: routed)
            guard length > 0 else { return serve(wsi, connection, admitted, body: []) }
            connection.phase.admitted(admitted, length: length)
            return readBody(wsi, connection, wanted: length)
        }
    }

    /// Reads and discards `count` bytes already seen with a peek.
    private func consume(_ wsi: OpaquePointer, _ count: Int) -> Bool {
        guard count > 0 else { return true }
        let result = withUnsafeTemporaryAllocation(byteCount: count, alignment: 1) { io.read(wsi, into: $0) }
        guard case .bytes(let n) = result else { return false }
        return n == count
    }

    private func readBody(_ wsi: OpaquePointer, _ connection: GateConnection, wanted: Int) -> Int32 {
        let outcome = withUnsafeTemporaryAllocation(byteCount: min(wanted, 16 * 1024), alignment: 8) {
            chunk -> (GateIOResult, (AdmittedRequest, body: [UInt8])?) in
            let result = io.read(wsi, into: chunk)
            guard case .bytes(let n) = result else { return (result, nil) }
            return (result, connection.phase.bodyArrived(UnsafeRawBufferPointer(rebasing: chunk[..<n])))
        }
        switch outcome {
        case (.bytes, let whole?): return serve(wsi, connection, whole.0, body: whole.body)
        case (.bytes, nil), (.wouldBlock, _): return 0
        case (.ended, _), (.failed, _): return -1
        }
    }

    /// The whole request is in: route it, and answer now or when ``respond(_:with:)`` is called.
    private func serve(_ wsi: OpaquePointer, _ connection: GateConnection, _ admitted: AdmittedRequest, body: [UInt8]) -> Int32 {
        guard let response = handler.serve(admitted.request, admitted.routed, bodyWasRead: !body.isEmpty, body: body) else {
            // Waiting for the database worker or the robot: nothing more to read (stop polling,
            // or a client that hung up would wake the loop until then), for a bounded time.
            connection.phase.deferred()
            io.pauseReading(wsi)
            io.closeAfter(wsi, seconds: deferredTimeoutSeconds)
            return 0
        }
        return answer(wsi, connection, response, then: .close)
    }

    // MARK: - Answering

    /// Sends a response that was deferred (from the service thread, outside the wsi's callbacks).
    func respond(_ wsi: OpaquePointer, with response: HTTPResponse) {
        guard let connection = connections[wsi] else { return }
        if answer(wsi, connection, response, then: .close, deferred: true) < 0 { io.closeSoon(wsi) }
    }

    /// `LWS_CALLBACK_RAW_WRITEABLE_FILE`: the rest of an answer.
    func writeable(_ wsi: OpaquePointer) -> Int32 {
        guard let connection = connections[wsi], case .answering = connection.phase else { return -1 }
        return flush(wsi, connection)
    }

    /// An answer given before the request was read whole (`unread`: the body bytes declared and
    /// not read; nil when unknown): it goes out, then the connection lingers — unless
    /// `lingering.capacity` connections already do, when it closes once the answer is out.
    private func answerEarly(_ wsi: OpaquePointer, _ connection: GateConnection, _ response: HTTPResponse, unread: Int?) -> Int32 {
        io.closeAfter(wsi, seconds: lingering.seconds)
        guard lingering.take() else { return answer(wsi, connection, response, then: .close) }
        connection.lingers = true
        return answer(wsi, connection, response, then: .linger(budget: min(unread ?? lingering.bytes, lingering.bytes)))
    }

    /// Writes `response` (`deferred`: one that came later through ``respond(_:with:)``, dropped
    /// unless the connection still waits for it).
    private func answer(_ wsi: OpaquePointer, _ connection: GateConnection, _ response: HTTPResponse, then: GatePhase.AfterAnswer,
                        deferred: Bool = false) -> Int32 {
        var response = response
        response.headers.append(("Connection", "close"))
        guard connection.phase.answer(response.serialized(), then: then, deferred: deferred) else { return deferred ? 0 : -1 }
        return flush(wsi, connection)
    }

    /// Writes what the socket takes now; once the answer is all out, closes (-1) or lingers.
    private func flush(_ wsi: OpaquePointer, _ connection: GateConnection) -> Int32 {
        while let pending = connection.phase.pendingAnswer, !pending.isEmpty {
            switch pending.withUnsafeBytes({ io.write(wsi, $0) }) {
            case .bytes(let n): connection.phase.wrote(n)
            case .wouldBlock:
                io.requestWritable(wsi)
                return 0
            case .ended, .failed: return -1  // the peer is gone
            }
        }
        switch connection.phase.answerWritten() {
        case .close: return -1
        case .linger:
            io.shutdownWrites(wsi)  // the FIN follows the answer; the client's bytes still come in
            return 0
        }
    }

    /// Reads and drops what a client sends after an early answer. Lingering, the socket closes
    /// (-1) once the client closed or `budget` bytes are gone (a declared body all in: nothing
    /// left to reset the answer); while the answer is still being written, it goes out first.
    private func drop(_ wsi: OpaquePointer, _ connection: GateConnection, budget: Int) -> Int32 {
        let outcome = withUnsafeTemporaryAllocation(byteCount: min(16 * 1024, budget), alignment: 8) { io.read(wsi, into: $0) }
        let dropped: Int?
        switch outcome {
        case .bytes(let n): dropped = n
        case .wouldBlock: return 0
        case .ended: dropped = nil  // the client sends no more
        case .failed: return -1
        }
        switch connection.phase.dropped(dropped) {
        case .keepReading: return 0
        case .pauseReading:
            io.pauseReading(wsi)  // `flush` closes once the answer is out
            return 0
        case .close: return -1
        }
    }

    /// A refusal of the gate's own (a malformed or too large request): logged, then answered
    /// early.
    private func refuse(_ wsi: OpaquePointer, _ connection: GateConnection, _ error: RelayError, unread: Int?) -> Int32 {
        handler.refused(error, peer: io.peerAddress(wsi))
        return answerEarly(wsi, connection, HTTPResponse.error(error), unread: unread)
    }

    /// `LWS_CALLBACK_RAW_CLOSE_FILE` of a connection.
    func closed(_ wsi: OpaquePointer) {
        guard let connection = connections.removeValue(forKey: wsi) else { return }
        if connection.lingers { lingering.release() }
        handler.gateConnectionClosed(wsi)
    }
}

extension HTTPGate: DeferredAnswering {
    func respond(_ client: HTTPClient, with response: HTTPResponse) { respond(client.handle, with: response) }
}

/// The lingering close of the gate's early answers (a refusal sent before the request was read
/// whole: 400, 401, 403, 411, 413, 429, …): its limits and its places. Closing a socket with
/// unread input makes Linux send a reset, which destroys an answer the client has not read yet;
/// and a client such as Python's urllib writes its whole body before it reads anything. So the
/// answer goes out, then a FIN, and the client's bytes are read and dropped until it closes — at
/// most `bytes` of them and for at most `seconds`. Past either the socket closes as it is (a
/// reset, if the client is still sending). At most `capacity` connections linger at once, as
/// many as closed WebSockets do (`LingeringCloser`): past it an early answer closes at once.
/// Service thread only.
final class GateLingering {
    let bytes: Int
    let seconds: Int32
    let capacity: Int
    /// Connections lingering now (each holds a descriptor for up to `seconds`), and early answers
    /// that closed at once because `capacity` were.
    private(set) var count = 0
    private(set) var refused = 0

    /// Room for the largest body any route takes (`largestBody`) and what may come with it.
    init(largestBody: Int, seconds: Int32 = 5, capacity: Int = LingeringCloser.capacity) {
        bytes = largestBody + HTTPGate.bodyLimit
        self.seconds = seconds
        self.capacity = capacity
    }

    /// A place to linger, if one is free (counted when none is).
    func take() -> Bool {
        guard count < capacity else {
            refused += 1
            return false
        }
        count += 1
        return true
    }

    /// A lingering connection closed.
    func release() { count -= 1 }
}

extension GateLingering: MetricsReporting {
    func report(to metrics: MetricsSink) {
        metrics.gauge("wimz_gate_lingering", "Plain-HTTP connections lingering after an early answer (at most \(capacity) at once).", count)
        metrics.counter("wimz_gate_linger_refused_total",
                        "Early answers closed at once, without lingering, because \(capacity) connections lingered.", refused)
    }
}
