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
    /// What serves the requests (`RelayComponents`). Set once, not given at init: the components
    /// that answer later take the gate's ``respond(_:with:)`` at their own init, and the router
    /// is built on them. Without one the gate refuses nothing itself and serves nothing.
    weak var handler: (any HTTPGateHandler)?
    /// Seconds a deferred request may wait for its answer before the connection is dropped.
    let deferredTimeoutSeconds: Int32

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
    /// to do next) and the one buffer that phase fills or empties.
    private final class GateConnection {
        let serial: UInt64
        var phase: GatePhase = .readingHead
        /// The head's bytes so far (`readingHead`), the body so far (`readingBody`), the answer
        /// still to write (`answering`).
        var buffer: [UInt8] = []
        init(serial: UInt64) { self.serial = serial }
    }

    /// The lingering close of an early answer (a refusal sent before the request was read whole:
    /// 400, 401, 403, 411, 413, 429, …). Closing a socket with unread input makes Linux send a
    /// reset, which destroys an answer the client has not read yet; and a client such as
    /// Python's urllib writes its whole body before it reads anything. So the answer goes out,
    /// then a FIN, and the client's bytes are read and dropped until it closes — at most
    /// `lingerBytes` of them (the largest body a route takes, with room to spare) and for at
    /// most `lingerSeconds`. Past either the socket closes as it is (a reset, if the client is
    /// still sending).
    static let lingerBytes = 4 * 1024 * 1024
    static let lingerSeconds: Int32 = 5

    /// Largest request body the gate reads unless the route says otherwise (the admin API's).
    static let bodyLimit = 64 * 1024

    init(io: GateIO, clock: RelayClock, limits: HTTPRequestHead.Limits = .init(), deferredTimeoutSeconds: Int32 = 30) {
        self.io = io
        self.clock = clock
        self.limits = limits
        self.deferredTimeoutSeconds = deferredTimeoutSeconds
    }

    /// A connection accepted: its request must arrive within 10 s (slow-loris, see `expire(now:)`).
    func accepted(_ wsi: OpaquePointer) {
        nextSerial += 1
        connections[wsi] = GateConnection(serial: nextSerial)
        requestDeadlines.append((wsi, nextSerial), deadline: clock.monotonic() + HTTPGate.requestTimeout)
    }

    /// An upgrade whose whole head came with the connection (`bytes`: what the socket holds at
    /// accept): its head (its credential read) and length when it may go to lws at once, without
    /// the gate reading it as a raw descriptor first (one lws descriptor and one close less per
    /// WebSocket: lws 4.1.6 scans its whole descriptor table on every close); the caller hands it
    /// over through `whenCredentialReady`. Nil for anything the gate must read as usual — an
    /// incomplete or malformed head, a request that is not a GET upgrade — so every refusal still
    /// happens where it always did.
    func upgradeOnArrival(_ bytes: UnsafeRawBufferPointer) -> (head: HTTPRequestHead, length: Int)? {
        guard HTTPGate.mentionsWebSocket(bytes),  // plain requests skip a parse here: readable parses them
              case .complete(var head, let length) = HTTPRequestHead.parse(bytes, limits: limits),
              head.isWebSocketUpgrade, head.method == "GET" else { return nil }
        head.credential = handler?.presentedCredential(in: head)
        return (head, length)
    }

    /// Calls `go` once `head`'s token is in memory: at once when it presents none or one that is
    /// held, otherwise when its lookup answers or its wait ends (a cold client's upgrade waits
    /// as a bare descriptor, not as an lws one); true. False, and `go` is never called, when it
    /// may not wait (an address over its failure limit, too many waiting): the caller lets the
    /// gate read it as any other connection, which answers that.
    func whenCredentialReady(_ head: HTTPRequestHead, peer: () -> String, _ go: @escaping () -> Void) -> Bool {
        switch handler?.awaitCredential(for: head, peer: peer, then: go) ?? .ready {
        case .ready:
            go()
            return true
        case .waiting: return true
        case .refused: return false
        }
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

    /// A waiting head's token is in memory (or its wait ended): the request goes on.
    private func credentialArrived(_ wsi: OpaquePointer, serial: UInt64) {
        guard let connection = connections[wsi], connection.serial == serial,
              let head = connection.phase.credentialArrived() else { return }
        if !head.isWebSocketUpgrade { io.resumeReading(wsi) }
        if proceed(wsi, connection, head) < 0 { io.closeSoon(wsi) }
    }

    /// `LWS_CALLBACK_RAW_RX_FILE` of a connection: request bytes to read; or, with `peeked` (what
    /// a peek at accept found in the socket), right after `accepted`, before any event.
    /// Returns -1 to have lws close that descriptor.
    func readable(_ wsi: OpaquePointer, peeked: ArraySlice<UInt8>? = nil) -> Int32 {
        guard let connection = connections[wsi] else { return -1 }
        switch connection.phase.onReadable {
        case .readHead: return readHead(wsi, connection, peeked: peeked)
        case .readBody(let admitted, let length): return readBody(wsi, connection, admitted, length: length)
        case .leave: return 0
        case .drop(let budget): return drop(wsi, connection, budget: budget)
        case .pauseReading:
            // Not polled, it cannot spin the loop; the socket closes once the answer is out.
            io.pauseReading(wsi)
            return 0
        }
    }

    /// Peeks, then consumes only the head's bytes: the body (or, for an upgrade, the first
    /// frames) stays in the socket for whoever reads next.
    private func readHead(_ wsi: OpaquePointer, _ connection: GateConnection, peeked: ArraySlice<UInt8>?) -> Int32 {
        let n: Int
        let before = connection.buffer.count
        if let peeked {
            n = peeked.count
            connection.buffer += peeked
        } else {
            // On the stack, not a zero-filled array (~4,000 instructions a read).
            let peek = withUnsafeTemporaryAllocation(byteCount: 4096, alignment: 1) { chunk in
                let result = io.peek(wsi, into: chunk)
                if case .bytes(let count) = result { connection.buffer += UnsafeRawBufferPointer(rebasing: chunk[..<count]) }
                return result
            }
            switch peek {
            case .bytes(let count): n = count
            case .wouldBlock: return 0
            case .ended, .failed: return -1  // closed before a whole head arrived
            }
        }
        switch HTTPRequestHead.parse(connection.buffer, limits: limits) {
        case .incomplete:
            return consume(wsi, n) ? 0 : -1
        case .invalid(let error):
            // Take what was read off the socket first; the rest, if any, lingers.
            _ = consume(wsi, n)
            return refuse(wsi, connection, error, unread: nil)
        case .complete(var head, let length):
            guard consume(wsi, length - before) else { return -1 }
            connection.buffer = []
            head.credential = handler?.presentedCredential(in: head)
            let serial = connection.serial
            let wait = handler?.awaitCredential(for: head, peer: { io.peerAddress(wsi) }, then: { [weak self] in
                self?.credentialArrived(wsi, serial: serial)
            }) ?? .ready
            switch connection.phase.headRead(head, wait: wait) {
            case .proceed(let head): return proceed(wsi, connection, head)
            case .pauseReading:
                io.pauseReading(wsi)
                return 0
            case .answerEarly(let error): return answerEarly(wsi, connection, .error(error), unread: nil)
            }
        }
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
        guard let handler else { return -1 }
        // Routed and its caller checked once, from the head: only an admitted request has its body read.
        let request = HTTPRequest(client: HTTPClient(wsi), head: head, peerAddress: io.peerAddress(wsi))
        switch handler.admit(request, contentLength: length) {
        case .answer(let response):
            return length > 0 ? answerEarly(wsi, connection, response, unread: length) : answer(wsi, connection, response, then: .close)
        case .bodyTooLarge(let limit):
            return refuse(wsi, connection, RelayError(.tooLarge, "request bodies are limited to \(limit) bytes here"), unread: length)
        case .admitted(let routed):
            let admitted = AdmittedRequest(request: request, routed: routed)
            guard length > 0 else { return serve(wsi, connection, admitted) }
            connection.phase.admitted(admitted, length: length)
            return readBody(wsi, connection, admitted, length: length)
        }
    }

    /// Reads and discards `count` bytes already seen with a peek.
    private func consume(_ wsi: OpaquePointer, _ count: Int) -> Bool {
        guard count > 0 else { return true }
        let result = withUnsafeTemporaryAllocation(byteCount: count, alignment: 1) { io.read(wsi, into: $0) }
        guard case .bytes(let n) = result else { return false }
        return n == count
    }

    private func readBody(_ wsi: OpaquePointer, _ connection: GateConnection, _ admitted: AdmittedRequest, length: Int) -> Int32 {
        let wanted = length - connection.buffer.count
        let outcome = withUnsafeTemporaryAllocation(byteCount: min(wanted, 16 * 1024), alignment: 8) { chunk in
            let result = io.read(wsi, into: chunk)
            if case .bytes(let n) = result { connection.buffer += UnsafeRawBufferPointer(rebasing: chunk[..<n]) }
            return result
        }
        switch outcome {
        case .bytes: return connection.buffer.count == length ? serve(wsi, connection, admitted) : 0
        case .wouldBlock: return 0
        case .ended, .failed: return -1
        }
    }

    /// The whole request is in: route it, and answer now or when ``respond(_:with:)`` is called.
    private func serve(_ wsi: OpaquePointer, _ connection: GateConnection, _ admitted: AdmittedRequest) -> Int32 {
        guard let handler else { return -1 }
        let body = connection.buffer
        connection.buffer = []
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
    /// not read; nil when unknown): it goes out, then the connection lingers.
    private func answerEarly(_ wsi: OpaquePointer, _ connection: GateConnection, _ response: HTTPResponse, unread: Int?) -> Int32 {
        let budget = min(unread ?? HTTPGate.lingerBytes, HTTPGate.lingerBytes)
        io.closeAfter(wsi, seconds: HTTPGate.lingerSeconds)
        return answer(wsi, connection, response, then: .linger(budget: budget))
    }

    /// Writes `response` (`deferred`: one that came later through ``respond(_:with:)``, dropped
    /// unless the connection still waits for it).
    private func answer(_ wsi: OpaquePointer, _ connection: GateConnection, _ response: HTTPResponse, then: GatePhase.AfterAnswer,
                        deferred: Bool = false) -> Int32 {
        guard connection.phase.answer(then: then, deferred: deferred) != nil else { return deferred ? 0 : -1 }
        var response = response
        response.headers.append(("Connection", "close"))
        connection.buffer = response.serialized()
        return flush(wsi, connection)
    }

    /// Writes what the socket takes now; once the answer is all out, closes (-1) or lingers.
    private func flush(_ wsi: OpaquePointer, _ connection: GateConnection) -> Int32 {
        while !connection.buffer.isEmpty {
            switch connection.buffer.withUnsafeBytes({ io.write(wsi, $0) }) {
            case .bytes(let n): connection.buffer.removeFirst(n)
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
        handler?.refused(error, peer: io.peerAddress(wsi))
        return answerEarly(wsi, connection, HTTPResponse.error(error), unread: unread)
    }

    /// `LWS_CALLBACK_RAW_CLOSE_FILE` of a connection.
    func closed(_ wsi: OpaquePointer) {
        if connections.removeValue(forKey: wsi) != nil { handler?.gateConnectionClosed(wsi) }
    }
}
