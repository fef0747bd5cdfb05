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

    /// One connection: reading its head, then its body, then writing the response.
    private final class GateConnection {
        let serial: UInt64
        /// Routed and waiting for the database worker (its own, longer timeout applies).
        var deferred = false
        init(serial: UInt64) { self.serial = serial }
        var bytes: [UInt8] = []
        var head: HTTPRequestHead?
        /// A complete head waiting for its token (`awaitCredential`).
        var waitingHead: HTTPRequestHead?
        var body: [UInt8] = []
        var bodyLength = 0
        var output: [UInt8] = []
        var answered = false
        /// Body bytes still to read and drop after an early refusal: the connection closes only
        /// then (closing with unread bytes sends a reset, which can destroy the answer on its way).
        var discarding = 0
    }

    /// How long a refused request's body may take to be thrown away.
    static let discardSeconds: Int32 = 5

    /// Largest request body the gate reads unless `bodyLimit` says otherwise (the admin API's).
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
    /// accept): its head and length when it may go to lws at once, without the gate reading it as
    /// a raw descriptor first (one lws descriptor and one close less per WebSocket: lws 4.1.6 scans
    /// its whole descriptor table on every close); the caller hands it over through
    /// `whenCredentialReady`. Nil for anything the gate must read as usual — an incomplete or
    /// malformed head, a request that is not a GET upgrade — so every refusal still happens where
    /// it always did.
    func upgradeOnArrival(_ bytes: UnsafeRawBufferPointer) -> (head: HTTPRequestHead, length: Int)? {
        guard HTTPGate.mentionsWebSocket(bytes),  // plain requests skip a parse here: readable parses them
              case .complete(let head, let length) = HTTPRequestHead.parse(bytes, limits: limits),
              head.isWebSocketUpgrade, head.method == "GET" else { return nil }
        return (head, length)
    }

    /// Calls `go` once `head`'s token is in memory: at once when it presents none or one that is
    /// held, otherwise when its lookup answers or its wait ends (a cold client's upgrade waits
    /// as a bare descriptor, not as an lws one).
    func whenCredentialReady(_ head: HTTPRequestHead, _ go: @escaping () -> Void) {
        if handler?.awaitCredential(presentedIn: head, then: go) != true { go() }
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
            guard let connection = connections[wsi], connection.serial == serial, !connection.answered,
                  !connection.deferred, connection.waitingHead == nil else { continue }
            io.closeSoon(wsi)
        }
    }

    /// A waiting head's token is in memory (or its wait ended): the request goes on.
    private func credentialArrived(_ wsi: OpaquePointer, serial: UInt64) {
        guard let connection = connections[wsi], connection.serial == serial, let head = connection.waitingHead else { return }
        connection.waitingHead = nil
        if !head.isWebSocketUpgrade { io.resumeReading(wsi) }
        if proceed(wsi, connection, head) < 0 { io.closeSoon(wsi) }
    }

    /// `LWS_CALLBACK_RAW_RX_FILE` of a connection: request bytes to read; or, with `peeked` (what
    /// a peek at accept found in the socket), right after `accepted`, before any event.
    /// Returns -1 to have lws close that descriptor.
    func readable(_ wsi: OpaquePointer, peeked: ArraySlice<UInt8>? = nil) -> Int32 {
        guard let connection = connections[wsi] else { return -1 }
        if connection.discarding > 0 { return discard(wsi, connection) }
        guard !connection.answered else { return -1 }
        guard connection.waitingHead == nil else { return 0 }  // read again once its token is in
        if connection.head != nil { return readBody(wsi, connection) }
        // Peek, then consume only the head's bytes: the body (or, for an upgrade, the first
        // frames) stays in the socket for whoever reads next.
        let n: Int
        let before = connection.bytes.count
        if let peeked {
            n = peeked.count
            connection.bytes += peeked
        } else {
            // On the stack, not a zero-filled array (~4,000 instructions a read).
            let peek = withUnsafeTemporaryAllocation(byteCount: 4096, alignment: 1) { chunk in
                let result = io.peek(wsi, into: chunk)
                if case .bytes(let count) = result { connection.bytes += UnsafeRawBufferPointer(rebasing: chunk[..<count]) }
                return result
            }
            switch peek {
            case .bytes(let count): n = count
            case .wouldBlock: return 0
            case .ended, .failed: return -1  // closed before a whole head arrived
            }
        }
        switch HTTPRequestHead.parse(connection.bytes, limits: limits) {
        case .incomplete:
            return consume(wsi, n) ? 0 : -1
        case .invalid(let error):
            // Take what was read off the socket first: closing with unread bytes sends a reset,
            // and the client may lose the answer with it.
            _ = consume(wsi, n)
            return refuse(wsi, connection, error)
        case .complete(let head, let length):
            guard consume(wsi, length - before) else { return -1 }
            connection.bytes = []
            let serial = connection.serial
            if handler?.awaitCredential(presentedIn: head, then: { [weak self] in self?.credentialArrived(wsi, serial: serial) }) == true {
                // Nothing more to read until its token is in; stop polling it meanwhile.
                connection.waitingHead = head
                io.pauseReading(wsi)
                return 0
            }
            return proceed(wsi, connection, head)
        }
    }

    /// A complete head (its bytes consumed), its token in memory if it presented one: an upgrade
    /// goes to lws, anything else has its body read and is served.
    private func proceed(_ wsi: OpaquePointer, _ connection: GateConnection, _ head: HTTPRequestHead) -> Int32 {
        if head.isWebSocketUpgrade {
            guard head.method == "GET" else {
                return refuse(wsi, connection, RelayError(.badRequest, "a WebSocket upgrade is a GET"))
            }
            io.handOver(wsi, head: head)
            return -1  // the raw wsi goes; its duplicate lives on in lws as a WebSocket
        }
        if head.header("transfer-encoding") != nil {
            return refuse(wsi, connection, RelayError(.lengthRequired, "send the body with Content-Length"))
        }
        guard let length = Int(head.header("content-length") ?? "0"), length >= 0 else {
            return refuse(wsi, connection, RelayError(.badRequest, "Content-Length is not a number"))
        }
        let limit = handler?.bodyLimit(head) ?? HTTPGate.bodyLimit
        guard length <= limit else {
            return refuse(wsi, connection, RelayError(.tooLarge, "request bodies are limited to \(limit) bytes here"))
        }
        if length > 0, let refusal = handler?.refusalBeforeBody(request(wsi, head)) {
            connection.discarding = length
            io.closeAfter(wsi, seconds: HTTPGate.discardSeconds)
            return write(refusal, to: wsi, connection) ? halfClose(wsi) : 0
        }
        connection.head = head
        connection.bodyLength = length
        return length == 0 ? serve(wsi, connection) : readBody(wsi, connection)
    }

    private func request(_ wsi: OpaquePointer, _ head: HTTPRequestHead) -> HTTPRequest {
        HTTPRequest(client: HTTPClient(wsi), head: head, peerAddress: io.peerAddress(wsi))
    }

    /// Reads and discards `count` bytes already seen with a peek.
    private func consume(_ wsi: OpaquePointer, _ count: Int) -> Bool {
        guard count > 0 else { return true }
        let result = withUnsafeTemporaryAllocation(byteCount: count, alignment: 1) { io.read(wsi, into: $0) }
        guard case .bytes(let n) = result else { return false }
        return n == count
    }

    /// Reads and drops what is left of a refused request's body; -1 (close) once it is all in.
    private func discard(_ wsi: OpaquePointer, _ connection: GateConnection) -> Int32 {
        let outcome = withUnsafeTemporaryAllocation(byteCount: min(16 * 1024, connection.discarding), alignment: 8) {
            io.read(wsi, into: $0)
        }
        switch outcome {
        case .bytes(let n):
            connection.discarding -= n
            return connection.discarding > 0 ? 0 : -1
        case .wouldBlock: return 0
        case .ended, .failed: return -1
        }
    }

    /// The answer is out but the body is still coming: tell the client we are done writing.
    private func halfClose(_ wsi: OpaquePointer) -> Int32 {
        io.shutdownWrites(wsi)
        return 0
    }

    private func readBody(_ wsi: OpaquePointer, _ connection: GateConnection) -> Int32 {
        let wanted = connection.bodyLength - connection.body.count
        guard wanted > 0 else { return 0 }
        var chunk = [UInt8](repeating: 0, count: min(wanted, 16 * 1024))
        switch chunk.withUnsafeMutableBytes({ io.read(wsi, into: $0) }) {
        case .bytes(let n): connection.body += chunk[..<n]
        case .wouldBlock: return 0
        case .ended, .failed: return -1
        }
        return connection.body.count == connection.bodyLength ? serve(wsi, connection) : 0
    }

    /// The whole request is in: route it, and answer now or when ``respond(_:with:)`` is called.
    private func serve(_ wsi: OpaquePointer, _ connection: GateConnection) -> Int32 {
        guard let head = connection.head, let handler else { return -1 }
        guard let response = handler.route(request(wsi, head), body: connection.body) else {
            // Waiting for the database worker or the robot: nothing more to read (stop polling,
            // or a client that hung up would wake the loop until then), for a bounded time.
            io.pauseReading(wsi)
            connection.deferred = true
            io.closeAfter(wsi, seconds: deferredTimeoutSeconds)
            return 0
        }
        return write(response, to: wsi, connection) ? -1 : 0
    }

    /// Sends a response that was deferred (from the service thread, outside the wsi's callbacks).
    func respond(_ wsi: OpaquePointer, with response: HTTPResponse) {
        guard let connection = connections[wsi], !connection.answered else { return }
        if write(response, to: wsi, connection) { io.closeSoon(wsi) }
    }

    /// `LWS_CALLBACK_RAW_WRITEABLE_FILE`: the rest of a response. -1 once it is all out.
    func writeable(_ wsi: OpaquePointer) -> Int32 {
        guard let connection = connections[wsi] else { return -1 }
        guard flush(wsi, connection) else { return 0 }
        return connection.discarding > 0 ? halfClose(wsi) : -1
    }

    /// Writes what the socket takes now; true when the response is all out (close it then).
    private func write(_ response: HTTPResponse, to wsi: OpaquePointer, _ connection: GateConnection) -> Bool {
        var response = response
        response.headers.append(("Connection", "close"))
        connection.answered = true
        connection.output = response.serialized()
        return flush(wsi, connection)
    }

    private func flush(_ wsi: OpaquePointer, _ connection: GateConnection) -> Bool {
        while !connection.output.isEmpty {
            switch connection.output.withUnsafeBytes({ io.write(wsi, $0) }) {
            case .bytes(let n): connection.output.removeFirst(n)
            case .wouldBlock:
                io.requestWritable(wsi)
                return false
            case .ended, .failed: return true  // the peer is gone: close
            }
        }
        return true
    }

    private func refuse(_ wsi: OpaquePointer, _ connection: GateConnection, _ error: RelayError) -> Int32 {
        handler?.refused(error, peer: io.peerAddress(wsi))
        let response = HTTPResponse.error(error)
        return write(response, to: wsi, connection) ? -1 : 0
    }

    /// `LWS_CALLBACK_RAW_CLOSE_FILE` of a connection.
    func closed(_ wsi: OpaquePointer) {
        if connections.removeValue(forKey: wsi) != nil { handler?.gateConnectionClosed(wsi) }
    }
}

/// What the gate asks of the relay about the requests it reads (`HTTPGate.handler`).
protocol HTTPGateHandler: AnyObject {
    /// Serves a complete plain-HTTP request: the response, or nil when it comes later through
    /// `HTTPGate.respond(_:with:)` (admin requests wait for the database worker).
    func route(_ request: HTTPRequest, body: [UInt8]) -> HTTPResponse?
    /// A refusal decided from the head before the body is read: it is sent at once and the body,
    /// as it arrives, is read and thrown away.
    func refusalBeforeBody(_ request: HTTPRequest) -> HTTPResponse?
    /// The largest body `head`'s route takes (`HTTPGate.bodyLimit` unless the route says
    /// otherwise: HTTP to the robot takes more).
    func bodyLimit(_ head: HTTPRequestHead) -> Int
    /// Asked with every complete head before it is read further: true when its token is being
    /// read from the store, and `resume` is called (service thread) once it is in. The
    /// connection waits without being read meanwhile, then goes on as if it had just arrived.
    func awaitCredential(presentedIn head: HTTPRequestHead, then resume: @escaping () -> Void) -> Bool
    /// A head the gate refused itself (malformed, too large, a slow client): logged and counted.
    func refused(_ error: RelayError, peer: String)
    /// A connection closed: deferred work for it is dropped.
    func gateConnectionClosed(_ wsi: OpaquePointer)
}

/// What the gate asks of a connection's socket (`socket` is its raw lws handle): reads, writes
/// and lws's timeouts and flow control. ``GateListener`` in the daemon; a scripted one in tests.
protocol GateIO: AnyObject {
    /// Copies what has arrived into `buffer` without taking it off the socket.
    func peek(_ socket: OpaquePointer, into buffer: UnsafeMutableRawBufferPointer) -> GateIOResult
    func read(_ socket: OpaquePointer, into buffer: UnsafeMutableRawBufferPointer) -> GateIOResult
    func write(_ socket: OpaquePointer, _ bytes: UnsafeRawBufferPointer) -> GateIOResult
    /// Ends the sending side (the client still sends; we read and drop it).
    func shutdownWrites(_ socket: OpaquePointer)
    /// Closes the socket from the loop's next pass.
    func closeSoon(_ socket: OpaquePointer)
    /// Closes the socket `seconds` from now unless it closes first.
    func closeAfter(_ socket: OpaquePointer, seconds: Int32)
    /// No more readable callbacks for the socket.
    func pauseReading(_ socket: OpaquePointer)
    /// Readable callbacks again.
    func resumeReading(_ socket: OpaquePointer)
    /// Asks for a writeable callback.
    func requestWritable(_ socket: OpaquePointer)
    func peerAddress(_ socket: OpaquePointer) -> String
    /// Hands an upgrade on to lws as a WebSocket with `head`; the raw socket closes after.
    func handOver(_ socket: OpaquePointer, head: HTTPRequestHead)
}

/// The outcome of one read or write on a gate socket.
enum GateIOResult: Equatable {
    case bytes(Int)
    /// Nothing now (EAGAIN).
    case wouldBlock
    /// The peer closed its side (a read of 0).
    case ended
    case failed
}
