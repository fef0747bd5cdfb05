import CLibWebSockets
import RelayCore

#if canImport(Glibc)
import Glibc
#endif

/// The relay's front door for plain HTTP: it owns the listening socket, reads each
/// connection's request head itself and parses it with ``HTTPRequestHead`` (exact bytes, strict
/// rules, size limits), and answers what is malformed with a real status and JSON body.
/// WebSocket upgrades go on to lws with a canonical head (`GET / HTTP/1.1` and only the headers
/// lws needs); every other request the gate serves itself — body, routing through the server,
/// response — one request per connection (`Connection: close`).
///
/// Why: lws 4.1.6 decodes the request target while it parses it — `;` splits arguments, a
/// decoded CR ends the request line, `%00` and an over-long head drop the connection without
/// an answer — so what it reports is not always what was sent. (And a request body handed to
/// lws through the adoption buffer makes 4.1.6 repeat its body-completion callback forever.)
///
/// Not with TLS served by lws itself (`WIMZ_TLS_CERT`): the gate cannot read ciphertext, so
/// lws listens and parses, and the server rebuilds the head from what lws reports.
final class HTTPGate {
    /// Protocol name the gate's raw descriptors are bound to (an entry of the vhost's list).
    static let protocolName = "wimz-gate"

    let limits: HTTPRequestHead.Limits
    let port: Int
    /// Called for every refused head (status, peer) so the server can log and count it.
    var onRefused: ((RequestError, String) -> Void)?
    /// Serves a complete plain-HTTP request: the response, or nil when it comes later through
    /// ``respond(_:with:)`` (admin requests wait for the database worker).
    var onRequest: ((HTTPRequest, [UInt8]) -> HTTPResponse?)?
    /// Checks a request's head before its body is read: a response here is sent at once and the
    /// body, as it arrives, is read and thrown away (see `GateConnection.discarding`).
    var checkHead: ((HTTPRequest) -> HTTPResponse?)?
    /// Called when a connection closes (so deferred work for it can be dropped).
    var onClosed: ((OpaquePointer) -> Void)?
    /// True while upgrades should wait (the token mirror is not loaded yet, see `release`).
    var holdUpgrades: (() -> Bool)?
    /// The largest body a request may carry (64 KiB unless the route says otherwise: HTTP to
    /// the robot takes more).
    var bodyLimit: (HTTPRequestHead) -> Int = { _ in HTTPGate.bodyLimit }
    /// The relay's clock (the server sets it; request deadlines follow it).
    var clock = RelayClock.system
    /// Seconds a deferred request may wait for its answer before the connection is dropped.
    var deferredTimeoutSeconds: Int32 = 30

    private var listenFD: Int32
    private var listener: OpaquePointer?
    private var vhost: OpaquePointer?
    private var context: OpaquePointer?
    /// Upgrades waiting for `releaseHeldUpgrades()`, by raw wsi.
    private var held: [OpaquePointer: HTTPRequestHead] = [:]
    /// Upgrades to hand to lws (duplicated descriptor, head) on the loop's next pass. Adopting
    /// with a buffer services the new connection at once; doing that inside another socket's
    /// callback let a nested close reorder lws's descriptor table under the outer one (an lws
    /// assertion with ~20,000 sockets during a stop), so it happens from a timer instead.
    private var handovers: [(fd: Int32, head: HTTPRequestHead)] = []
    private var eventLoop = EventLoopRegistration()
    private var stopped = false
    private lazy var handoverTimer = LWSTimer(repeats: false) { [unowned self] in adoptHandovers() }
    /// Connections the gate serves, by their raw wsi.
    private var connections: [OpaquePointer: GateConnection] = [:]
    /// Parsed heads of upgrades handed to lws, by socket descriptor, until confirmed.
    private var heads: [Int32: HTTPRequestHead] = [:]

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

    /// Binds and listens on `host:port` (port 0 picks a free one).
    init(host: String, port: Int, limits: HTTPRequestHead.Limits = .init()) throws {
        self.limits = limits
        var hints = addrinfo()
        hints.ai_family = AF_UNSPEC
        hints.ai_socktype = Int32(SOCK_STREAM.rawValue)
        hints.ai_flags = AI_PASSIVE | AI_NUMERICHOST
        var result: UnsafeMutablePointer<addrinfo>?
        guard getaddrinfo(host, String(port), &hints, &result) == 0, let info = result else {
            throw ServerError(description: "cannot listen on \(host):\(port): not a numeric address")
        }
        defer { freeaddrinfo(result) }
        let fd = socket(info.pointee.ai_family, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_NONBLOCK.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        guard fd >= 0 else { throw ServerError(description: "socket(): \(String(cString: strerror(errno)))") }
        var one: Int32 = 1
        setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, socklen_t(MemoryLayout<Int32>.size))
        guard bind(fd, info.pointee.ai_addr, info.pointee.ai_addrlen) == 0, listen(fd, 4096) == 0 else {
            let reason = String(cString: strerror(errno))
            close(fd)
            throw ServerError(description: "cannot listen on \(host):\(port): \(reason)")
        }
        var bound = sockaddr_storage()
        var length = socklen_t(MemoryLayout<sockaddr_storage>.size)
        withUnsafeMutablePointer(to: &bound) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { _ = getsockname(fd, $0, &length) }
        }
        self.port = Int(UInt16(bigEndian: withUnsafeBytes(of: bound) { $0.load(fromByteOffset: 2, as: UInt16.self) }))
        listenFD = fd
    }

    deinit {
        // Once adopted, lws owns (and closes) the listening descriptor.
        if listener == nil, listenFD >= 0 { close(listenFD) }
    }

    /// Puts the listening socket into the lws loop.
    func attach(to vhost: OpaquePointer) throws {
        var descriptor = lws_sock_file_fd_type()
        descriptor.filefd = listenFD
        guard let wsi = lws_adopt_descriptor_vhost(vhost, LWS_ADOPT_RAW_FILE_DESC, descriptor, HTTPGate.protocolName, nil) else {
            listenFD = -1  // lws closed it
            throw ServerError(description: "lws could not adopt the listening socket")
        }
        listener = wsi
        self.vhost = vhost
        context = lws_get_context(wsi)
    }

    /// Closes connections whose request did not arrive in time (service thread, every wheel tick).
    func expire(now: UInt64) {
        for (wsi, serial) in requestDeadlines.popExpired(now: now) {
            guard let connection = connections[wsi], connection.serial == serial, !connection.answered,
                  !connection.deferred, held[wsi] == nil else { continue }
            lws_set_timeout(wsi, PENDING_TIMEOUT_USER_OK, LWS_TO_KILL_ASYNC)
        }
    }

    /// Stops accepting connections (the listening socket closes; clients get "refused" and go
    /// elsewhere or retry) while the ones already accepted are still served.
    func stopAccepting() {
        guard let listener else { return }
        lws_set_timeout(listener, PENDING_TIMEOUT_USER_OK, LWS_TO_KILL_ASYNC)  // lws closes listenFD
        self.listener = nil
        listenFD = -1
    }

    /// Before the context goes: no more adoptions, and no timer may outlive it.
    func stop() {
        stopped = true
        stopAccepting()
        handoverTimer.cancel()
        for handover in handovers { close(handover.fd) }
        handovers.removeAll()
    }

    /// Hands every held upgrade on to lws (its checks answer them now).
    func releaseHeldUpgrades() {
        guard !held.isEmpty else { return }
        let waiting = held
        held.removeAll()
        for (wsi, head) in waiting {
            queueHandover(fd: lws_get_socket_fd(wsi), head: head)
            lws_set_timeout(wsi, PENDING_TIMEOUT_USER_OK, LWS_TO_KILL_ASYNC)  // the raw wsi goes
        }
    }

    /// `LWS_CALLBACK_RAW_RX_FILE`: a connection to accept, or request bytes to read.
    /// Returns -1 to have lws close that descriptor.
    func readable(_ wsi: OpaquePointer, vhost: OpaquePointer) -> Int32 {
        if stopped { return -1 }  // the listener and half-read requests go with the context
        if wsi == listener {
            acceptPending(vhost: vhost)
            return 0
        }
        guard let connection = connections[wsi] else { return -1 }
        let fd = lws_get_socket_fd(wsi)
        if connection.discarding > 0 { return discard(connection, fd: fd) }
        guard !connection.answered else { return -1 }
        if connection.head != nil { return readBody(wsi, connection, fd: fd) }
        // Peek, then consume only the head's bytes: the body (or, for an upgrade, the first
        // frames) stays in the socket for whoever reads next.
        var chunk = [UInt8](repeating: 0, count: 4096)
        let n = recv(fd, &chunk, chunk.count, Int32(MSG_PEEK))
        if n < 0 { return errno == EAGAIN || errno == EINTR ? 0 : -1 }
        if n == 0 { return -1 }  // closed before a whole head arrived
        let before = connection.bytes.count
        connection.bytes += chunk[..<n]
        switch HTTPRequestHead.parse(connection.bytes, limits: limits) {
        case .incomplete:
            return consume(fd, n) ? 0 : -1
        case .invalid(let error):
            // Take what was read off the socket first: closing with unread bytes sends a reset,
            // and the client may lose the answer with it.
            _ = consume(fd, n)
            return refuse(wsi, connection, error)
        case .complete(let head, let length):
            guard consume(fd, length - before) else { return -1 }
            connection.bytes = []
            if head.isWebSocketUpgrade {
                guard head.method == "GET" else {
                    return refuse(wsi, connection, RequestError(.badRequest, "a WebSocket upgrade is a GET"))
                }
                if holdUpgrades?() == true {
                    // Nothing more to read until it is answered; stop polling it meanwhile.
                    connection.answered = true
                    held[wsi] = head
                    lws_rx_flow_control(wsi, 0)
                    return 0
                }
                queueHandover(fd: fd, head: head)
                return -1  // the raw wsi goes; its duplicate lives on in lws as a WebSocket
            }
            if head.header("transfer-encoding") != nil {
                return refuse(wsi, connection, RequestError(.lengthRequired, "send the body with Content-Length"))
            }
            guard let length = Int(head.header("content-length") ?? "0"), length >= 0 else {
                return refuse(wsi, connection, RequestError(.badRequest, "Content-Length is not a number"))
            }
            let limit = bodyLimit(head)
            guard length <= limit else {
                return refuse(wsi, connection, RequestError(.tooLarge, "request bodies are limited to \(limit) bytes here"))
            }
            if length > 0, let refusal = checkHead?(LWSHTTP.request(wsi, head: head)) {
                connection.discarding = length
                lws_set_timeout(wsi, PENDING_TIMEOUT_USER_OK, HTTPGate.discardSeconds)
                return write(refusal, to: wsi, connection) ? halfClose(fd) : 0
            }
            connection.head = head
            connection.bodyLength = length
            return length == 0 ? serve(wsi, connection) : readBody(wsi, connection, fd: fd)
        }
    }

    /// Reads and discards `count` bytes already seen with MSG_PEEK.
    private func consume(_ fd: Int32, _ count: Int) -> Bool {
        guard count > 0 else { return true }
        var sink = [UInt8](repeating: 0, count: count)
        return read(fd, &sink, count) == count
    }

    /// Reads and drops what is left of a refused request's body; -1 (close) once it is all in.
    private func discard(_ connection: GateConnection, fd: Int32) -> Int32 {
        let n = withUnsafeTemporaryAllocation(byteCount: 16 * 1024, alignment: 8) {
            read(fd, $0.baseAddress, min($0.count, connection.discarding))
        }
        if n < 0 { return errno == EAGAIN || errno == EINTR ? 0 : -1 }
        if n == 0 { return -1 }
        connection.discarding -= n
        return connection.discarding > 0 ? 0 : -1
    }

    /// The answer is out but the body is still coming: tell the client we are done writing.
    private func halfClose(_ fd: Int32) -> Int32 {
        shutdown(fd, Int32(SHUT_WR))
        return 0
    }

    private func readBody(_ wsi: OpaquePointer, _ connection: GateConnection, fd: Int32) -> Int32 {
        let wanted = connection.bodyLength - connection.body.count
        guard wanted > 0 else { return 0 }
        var chunk = [UInt8](repeating: 0, count: min(wanted, 16 * 1024))
        let n = read(fd, &chunk, chunk.count)
        if n < 0 { return errno == EAGAIN || errno == EINTR ? 0 : -1 }
        if n == 0 { return -1 }
        connection.body += chunk[..<n]
        return connection.body.count == connection.bodyLength ? serve(wsi, connection) : 0
    }

    /// The whole request is in: route it, and answer now or when ``respond(_:with:)`` is called.
    private func serve(_ wsi: OpaquePointer, _ connection: GateConnection) -> Int32 {
        guard let head = connection.head, let onRequest else { return -1 }
        guard let response = onRequest(LWSHTTP.request(wsi, head: head), connection.body) else {
            // Waiting for the database worker or the robot: nothing more to read (stop polling,
            // or a client that hung up would wake the loop until then), for a bounded time.
            lws_rx_flow_control(wsi, 0)
            connection.deferred = true
            lws_set_timeout(wsi, PENDING_TIMEOUT_HTTP_CONTENT, deferredTimeoutSeconds)
            return 0
        }
        return write(response, to: wsi, connection) ? -1 : 0
    }

    /// Sends a response that was deferred (from the service thread, outside the wsi's callbacks).
    func respond(_ wsi: OpaquePointer, with response: HTTPResponse) {
        guard let connection = connections[wsi], !connection.answered else { return }
        if write(response, to: wsi, connection) {
            lws_set_timeout(wsi, PENDING_TIMEOUT_USER_OK, LWS_TO_KILL_ASYNC)
        }
    }

    /// `LWS_CALLBACK_RAW_WRITEABLE_FILE`: the rest of a response. -1 once it is all out.
    func writeable(_ wsi: OpaquePointer) -> Int32 {
        guard let connection = connections[wsi] else { return -1 }
        guard flush(wsi, connection) else { return 0 }
        return connection.discarding > 0 ? halfClose(lws_get_socket_fd(wsi)) : -1
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
        let fd = lws_get_socket_fd(wsi)
        while !connection.output.isEmpty {
            let n = connection.output.withUnsafeBytes { Glibc.write(fd, $0.baseAddress, $0.count) }
            if n < 0 {
                if errno == EINTR { continue }
                if errno == EAGAIN {
                    lws_callback_on_writable(wsi)
                    return false
                }
                return true  // the peer is gone: close
            }
            connection.output.removeFirst(n)
        }
        return true
    }

    private func refuse(_ wsi: OpaquePointer, _ connection: GateConnection, _ error: RequestError) -> Int32 {
        onRefused?(error, LWSHTTP.peerAddress(of: wsi))
        let response = HTTPResponse.error(error.code, error.message)
        return write(response, to: wsi, connection) ? -1 : 0
    }

    /// `LWS_CALLBACK_RAW_CLOSE_FILE`.
    func closed(_ wsi: OpaquePointer) {
        held[wsi] = nil
        if connections.removeValue(forKey: wsi) != nil { onClosed?(wsi) }
        if wsi == listener { listener = nil }
    }

    /// The parsed head of an upgrade handed to lws (nil for ones the gate never saw).
    func head(of wsi: OpaquePointer) -> HTTPRequestHead? { heads[lws_get_socket_fd(wsi)] }

    /// Drops the head once the upgrade is confirmed or refused.
    func forget(_ wsi: OpaquePointer) { heads[lws_get_socket_fd(wsi)] = nil }

    private func acceptPending(vhost: OpaquePointer) {
        for _ in 0..<256 {
            let fd = accept(listenFD, nil, nil)
            guard fd >= 0 else { return }  // EAGAIN: all taken; EMFILE: lws's table is full too
            _ = fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK)
            _ = fcntl(fd, F_SETFD, FD_CLOEXEC)
            var one: Int32 = 1
            setsockopt(fd, Int32(IPPROTO_TCP), TCP_NODELAY, &one, socklen_t(MemoryLayout<Int32>.size))
            var descriptor = lws_sock_file_fd_type()
            descriptor.filefd = fd
            guard let wsi = lws_adopt_descriptor_vhost(vhost, LWS_ADOPT_RAW_FILE_DESC, descriptor, HTTPGate.protocolName, nil)
            else { continue }  // lws closed it
            nextSerial += 1
            connections[wsi] = GateConnection(serial: nextSerial)
            // A request must arrive within 10 s (slow-loris): see `expire(now:)`.
            requestDeadlines.append((wsi, nextSerial), deadline: clock.monotonic() + HTTPGate.requestTimeout)
        }
    }

    /// Keeps a duplicate of the connection for `adoptHandovers()` (the raw one closes now).
    private func queueHandover(fd: Int32, head: HTTPRequestHead) {
        guard !stopped else { return }
        let duplicate = dup(fd)
        guard duplicate >= 0, let context else { return }  // out of descriptors: the client retries
        eventLoop.remove(fd, listener: listenFD)  // the raw descriptor closes; the duplicate stays
        handovers.append((duplicate, head))
        if handovers.count == 1 {
            handoverTimer.schedule(context: context, after: 0)
        }
    }

    /// Gives lws each queued connection with a canonical upgrade head; the client's first
    /// frames, if any, are still unread in the socket.
    private func adoptHandovers() {
        guard let vhost else { return }
        let batch = handovers
        handovers.removeAll()
        for (fd, head) in batch {
            var canonical = "GET / HTTP/1.1\r\n"
            for (name, value) in head.headers where HTTPGate.forwardedHeaders.contains(name) {
                canonical += "\(name): \(value)\r\n"
            }
            canonical += "\r\n"
            let bytes = Array(canonical.utf8)
            heads[fd] = head
            let adopted = bytes.withUnsafeBufferPointer { buffer in
                buffer.baseAddress!.withMemoryRebound(to: CChar.self, capacity: buffer.count) {
                    lws_adopt_socket_vhost_readbuf(vhost, fd, $0, buffer.count)
                }
            }
            if adopted == nil { heads[fd] = nil }  // lws closed the descriptor
        }
    }

    /// What lws needs to upgrade to WebSocket; everything else the server reads from the
    /// gate's parse.
    static let forwardedHeaders: Set<String> = [
        "host", "connection", "upgrade", "sec-websocket-key", "sec-websocket-version", "sec-websocket-protocol",
        "sec-websocket-extensions", "origin",
    ]
}
