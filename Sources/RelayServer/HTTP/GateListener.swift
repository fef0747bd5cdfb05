import CEpoll
import CLibWebSockets
import RelayCore

#if canImport(Glibc)
import Glibc
#endif

/// The HTTP gate's sockets (see ``HTTPGate``): the listening socket, the accepted connections as
/// raw lws descriptors, their reads and writes, and the handover of each WebSocket upgrade to lws
/// with a canonical head. Owns the listening descriptor until lws adopts it.
final class GateListener: GateIO {
    /// Protocol name the gate's raw descriptors are bound to (an entry of the vhost's list).
    static let protocolName = "wimz-gate"

    let port: Int
    private(set) var listenFD: Int32
    private var listener: OpaquePointer?
    private var vhost: OpaquePointer?
    private var context: OpaquePointer?
    /// Set once the context is going: no more adoptions, and the listener and half-read
    /// requests go with it.
    private(set) var isStopped = false
    /// Upgrades to hand to lws (duplicated descriptor, head) on the loop's next pass. Adopting
    /// with a buffer services the new connection at once; doing that inside another socket's
    /// callback let a nested close reorder lws's descriptor table under the outer one (an lws
    /// assertion with ~20,000 sockets during a stop), so it happens from a timer instead.
    private var handovers: [(fd: Int32, head: HTTPRequestHead)] = []
    private var eventLoop = EventLoopRegistration()
    private lazy var handoverTimer = LWSTimer(repeats: false) { [unowned self] in adoptHandovers() }
    /// Parsed heads of upgrades handed to lws, by socket descriptor, until confirmed.
    private var heads: [Int32: HTTPRequestHead] = [:]
    /// Where accept peeks at a connection's first bytes, and where a handed-over head is read off
    /// its socket: one buffer for every accept (zero-filled arrays cost ~4,000 instructions each).
    private let scratch = UnsafeMutableRawBufferPointer.allocate(byteCount: 4096, alignment: 1)

    /// The client sockets' TCP options the kernel refused (each connection inherits the others).
    let refusedTCPOptions: [TCPLiveness.Refusal]

    /// Binds and listens on `host:port` (port 0 picks a free one); every connection it accepts
    /// has `tcp`'s options.
    init(host: String, port: Int, tcp: TCPLiveness) throws {
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
        // Accept a connection once its first bytes are in (or after a few seconds): the request
        // head is then usually whole at accept, so an upgrade skips the raw descriptor (see
        // `HTTPGate.arrival(of:peer:whenReady:)`), and a client that connects and says nothing costs no accept.
        var deferSeconds = GateListener.deferAcceptSeconds
        setsockopt(fd, Int32(IPPROTO_TCP), TCP_DEFER_ACCEPT, &deferSeconds, socklen_t(MemoryLayout<Int32>.size))
        // Every accepted connection inherits TCP_NODELAY from the listener (Linux copies it to
        // each child socket): one setsockopt here instead of one per connection.
        setsockopt(fd, Int32(IPPROTO_TCP), TCP_NODELAY, &one, socklen_t(MemoryLayout<Int32>.size))
        refusedTCPOptions = tcp.apply(to: fd)
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
        scratch.deallocate()
    }

    /// Puts the listening socket into the lws loop.
    func attach(to vhost: OpaquePointer) throws {
        var descriptor = lws_sock_file_fd_type()
        descriptor.filefd = listenFD
        guard let wsi = lws_adopt_descriptor_vhost(vhost, LWS_ADOPT_RAW_FILE_DESC, descriptor, GateListener.protocolName, nil) else {
            listenFD = -1  // lws closed it
            throw ServerError(description: "lws could not adopt the listening socket")
        }
        listener = wsi
        self.vhost = vhost
        context = lws_get_context(wsi)
    }

    /// Whether `wsi` is the listening socket (readable: connections to accept).
    func isListening(_ wsi: OpaquePointer) -> Bool { wsi == listener }

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
        isStopped = true
        stopAccepting()
        handoverTimer.cancel()
        for handover in handovers { close(handover.fd) }
        handovers.removeAll()
    }

    /// Seconds the kernel holds a connection that has sent nothing before accept sees it.
    static let deferAcceptSeconds: Int32 = 5

    /// Accepts what is waiting (up to 256 a pass), each connection top to bottom: its first bytes
    /// peeked, the gate's decision on them (``HTTPGate/arrival(of:peer:whenReady:)``: head,
    /// credential, lookup), then the upgrade handed to lws, or the connection adopted for the
    /// gate to read or to refuse.
    func acceptPending(for gate: HTTPGate) {
        guard vhost != nil else { return }
        for _ in 0..<256 {
            let fd = CEpoll_acceptNonBlocking(listenFD)
            guard fd >= 0 else { return }  // EAGAIN: all taken; EMFILE: lws's table is full too (TCP_NODELAY: inherited)
            // With TCP_DEFER_ACCEPT the request is usually in the socket already: one peek serves
            // both the upgrade's way to lws and the gate's first read.
            let n = max(0, recv(fd, scratch.baseAddress, scratch.count, Int32(MSG_PEEK)))
            let peeked = UnsafeRawBufferPointer(rebasing: scratch[..<n])  // parsed where it lies
            let arrival: HTTPGate.Arrival = isStopped ? .read
                : gate.arrival(of: peeked, peer: { LWSHTTP.peerAddress(ofDescriptor: fd) }, whenReady: { [weak self] head, length in
                    guard let self else { Glibc.close(fd); return }
                    handOver(fd, head, headLength: length)
                })
            switch arrival {
            case .handOver(let head, let length): handOver(fd, head, headLength: length)
            case .waiting: continue  // `whenReady` hands it over
            case .read:
                // Copied for the gate's read: an adoption may run callbacks that use `scratch`.
                let waiting = Array(peeked)
                guard let wsi = adoptForGate(fd) else { continue }
                if waiting.withUnsafeBytes({ gate.accepted(wsi, peeked: $0) }) < 0 { closeSoon(wsi) }
            case .refuse(let error, let length):
                guard let wsi = adoptForGate(fd) else { continue }
                if gate.accepted(wsi, refusing: error, headLength: length) < 0 { closeSoon(wsi) }
            }
        }
    }

    /// `fd` as a raw lws descriptor of the gate's (nil: lws closed it).
    private func adoptForGate(_ fd: Int32) -> OpaquePointer? {
        guard let vhost else { Glibc.close(fd); return nil }
        var descriptor = lws_sock_file_fd_type()
        descriptor.filefd = fd
        return lws_adopt_descriptor_vhost(vhost, LWS_ADOPT_RAW_FILE_DESC, descriptor, GateListener.protocolName, nil)
    }

    /// An upgrade decided at accept goes to lws: its head, seen in the socket then, is read off
    /// (the client's first frames stay), and the descriptor queued for `adoptHandovers()`.
    private func handOver(_ fd: Int32, _ head: HTTPRequestHead, headLength: Int) {
        // The head's length is at most the scratch buffer's, where it was peeked.
        guard !isStopped, let context, Glibc.read(fd, scratch.baseAddress, headLength) == headLength else {
            Glibc.close(fd)  // stopping, or a failing socket
            return
        }
        queueHandover(fd, head, context: context)
    }

    private func queueHandover(_ fd: Int32, _ head: HTTPRequestHead, context: OpaquePointer) {
        handovers.append((fd, head))
        if handovers.count == 1 { handoverTimer.schedule(context: context, after: 0) }
    }

    /// `LWS_CALLBACK_RAW_CLOSE_FILE` of any of its descriptors.
    func closed(_ wsi: OpaquePointer) {
        if wsi == listener { listener = nil }
    }

    /// The parsed head of an upgrade handed to lws (nil for ones the gate never saw).
    func head(of wsi: OpaquePointer) -> HTTPRequestHead? { heads[lws_get_socket_fd(wsi)] }

    /// Drops the head once the upgrade is confirmed or refused.
    func forget(_ wsi: OpaquePointer) { heads[lws_get_socket_fd(wsi)] = nil }

    // MARK: - GateIO

    func peek(_ socket: OpaquePointer, into buffer: UnsafeMutableRawBufferPointer) -> GateIOResult {
        GateIOResult(recv(lws_get_socket_fd(socket), buffer.baseAddress, buffer.count, Int32(MSG_PEEK)))
    }

    func read(_ socket: OpaquePointer, into buffer: UnsafeMutableRawBufferPointer) -> GateIOResult {
        GateIOResult(Glibc.read(lws_get_socket_fd(socket), buffer.baseAddress, buffer.count))
    }

    func write(_ socket: OpaquePointer, _ bytes: UnsafeRawBufferPointer) -> GateIOResult {
        while true {
            let n = Glibc.write(lws_get_socket_fd(socket), bytes.baseAddress, bytes.count)
            if n < 0, errno == EINTR { continue }
            return GateIOResult(n)
        }
    }

    func shutdownWrites(_ socket: OpaquePointer) { shutdown(lws_get_socket_fd(socket), Int32(SHUT_WR)) }

    func closeSoon(_ socket: OpaquePointer) { lws_set_timeout(socket, PENDING_TIMEOUT_USER_OK, LWS_TO_KILL_ASYNC) }

    func closeAfter(_ socket: OpaquePointer, seconds: Int32) { lws_set_timeout(socket, PENDING_TIMEOUT_USER_OK, seconds) }

    func pauseReading(_ socket: OpaquePointer) { lws_rx_flow_control(socket, 0) }

    func resumeReading(_ socket: OpaquePointer) { lws_rx_flow_control(socket, 1) }

    func requestWritable(_ socket: OpaquePointer) { lws_callback_on_writable(socket) }

    func peerAddress(_ socket: OpaquePointer) -> String { LWSHTTP.peerAddress(of: socket) }

    /// Takes `fd` out of the event loop's epoll set before it closes while a duplicate of it
    /// lives on (see `EventLoopRegistration`).
    func removeFromEventLoop(_ fd: Int32) { eventLoop.remove(fd, listener: listenFD) }

    /// Keeps a duplicate of the connection for `adoptHandovers()` (the raw one closes as the
    /// gate lets it go).
    func handOver(_ socket: OpaquePointer, head: HTTPRequestHead) {
        guard !isStopped else { return }
        let fd = lws_get_socket_fd(socket)
        let duplicate = dup(fd)
        guard duplicate >= 0, let context else { return }  // out of descriptors: the client retries
        removeFromEventLoop(fd)  // the raw descriptor closes; the duplicate stays
        queueHandover(duplicate, head, context: context)
    }

    /// Gives lws each queued connection with a canonical upgrade head; the client's first
    /// frames, if any, are still unread in the socket.
    private func adoptHandovers() {
        guard let vhost else { return }
        let batch = handovers
        handovers.removeAll()
        LWSLogBridge.withoutLogs { adopt(batch, into: vhost) }
    }

    private func adopt(_ batch: [(fd: Int32, head: HTTPRequestHead)], into vhost: OpaquePointer) {
        for (fd, head) in batch {
            var canonical = "GET / HTTP/1.1\r\n"
            for (name, value) in head.headers where GateListener.forwardedHeaders.contains(name) {
                canonical += "\(name): \(value)\r\n"
            }
            canonical += "\r\n"
            let bytes = Array(canonical.utf8)
            heads[fd] = head
            // Corked until the connection's first message is written (the app's device status,
            // the robot's app count): the 101 leaves with it in one segment, one packet and
            // one wakeup less for both ends. The endpoint uncorks (`WebSocketEndpoint.releaseCork`);
            // a refused upgrade is closed, which lets its response out at once.
            TCPCork.set(fd, true)
            let adopted = bytes.withUnsafeBufferPointer { buffer in
                buffer.baseAddress!.withMemoryRebound(to: CChar.self, capacity: buffer.count) {
                    lws_adopt_socket_vhost_readbuf(vhost, fd, $0, buffer.count)
                }
            }
            if adopted == nil {  // lws closed the descriptor
                heads[fd] = nil
                LWSLogBridge.log.warning("gate_adoption_failed", metadata: ["fd": .stringConvertible(fd)])
            }
        }
    }

    /// What lws needs to upgrade to WebSocket; everything else the server reads from the
    /// gate's parse.
    static let forwardedHeaders: Set<String> = [
        "host", "connection", "upgrade", "sec-websocket-key", "sec-websocket-version", "sec-websocket-protocol",
        "sec-websocket-extensions", "origin",
    ]
}

extension GateIOResult {
    /// The outcome of a read, recv or write call that returned `n` (errno read when negative).
    init(_ n: Int) {
        if n > 0 {
            self = .bytes(n)
        } else if n == 0 {
            self = .ended
        } else {
            self = errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR ? .wouldBlock : .failed
        }
    }
}
