import WimzProtocol
import CEpoll
#if canImport(Glibc)
import Glibc
#endif

/// Monotonic nanoseconds.
func monotonicNanos() -> UInt64 {
    var ts = timespec()
    clock_gettime(CLOCK_MONOTONIC, &ts)
    return UInt64(ts.tv_sec) * 1_000_000_000 + UInt64(ts.tv_nsec)
}

/// One client WebSocket driven by the engine.
final class LoadSocket {
    enum State { case connecting, handshaking, open, closed }
    let fd: Int32
    let isRobot: Bool
    let device: Int
    var state = State.connecting
    /// The connection was refused (nothing listening).
    var refused = false
    var inbox: [UInt8] = []
    var inboxStart = 0
    var outbox: [UInt8] = []
    var startedAt: UInt64 = 0
    /// Robot: next sequence number to send. App: highest sequence received.
    var seq: UInt64 = 0
    var lastSeen: UInt64 = 0
    /// What it connected with, so it can connect again (the reconnect storm).
    var path = ""
    var token = ""

    init(fd: Int32, isRobot: Bool, device: Int) {
        self.fd = fd
        self.isRobot = isRobot
        self.device = device
    }
}

/// A single-threaded epoll WebSocket load generator for loopback benchmarks of the relay.
/// Client frames use a zero masking key (valid per RFC 6455 and free to apply).
final class LoadEngine {
    let port: UInt16
    let epfd = epoll_create1(0)
    var sockets: [Int32: LoadSocket] = [:]
    var handshakeTimes: [UInt64] = []
    var handshakeFailures = 0
    /// Refused upgrades by "status error-code" ("no answer": the connection failed or closed first).
    var refusals: [String: Int] = [:]
    var latenciesNanos: [UInt32] = []
    var received = 0
    var measuring = false
    var measureStart: UInt64 = 0
    var onMessage: ((LoadSocket, UnsafeBufferPointer<UInt8>) -> Void)?

    init(port: Int) {
        self.port = UInt16(port)
        latenciesNanos.reserveCapacity(1 << 22)
    }

    /// Starts a non-blocking connection and upgrade request.
    func open(path: String, token: String, isRobot: Bool, device: Int) -> LoadSocket? {
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_NONBLOCK.rawValue), 0)
        guard fd >= 0 else { return nil }
        var one: Int32 = 1
        setsockopt(fd, Int32(IPPROTO_TCP), TCP_NODELAY, &one, socklen_t(MemoryLayout<Int32>.size))
        bindSourceAddress(fd)
        var addr = sockaddr_in()
        addr.sin_family = sa_family_t(AF_INET)
        addr.sin_port = port.bigEndian
        addr.sin_addr.s_addr = UInt32(0x7f00_0001).bigEndian
        _ = withUnsafePointer(to: &addr) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { connect(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
        }
        let s = LoadSocket(fd: fd, isRobot: isRobot, device: device)
        s.path = path
        s.token = token
        s.startedAt = monotonicNanos()
        s.outbox = Array(("GET \(path) HTTP/1.1\r\nHost: 127.0.0.1\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
            + "Sec-WebSocket-Key: d2ltei1iZW5jaC1rZXk=\r\nSec-WebSocket-Version: 13\r\n"
            + "Authorization: Bearer \(token)\r\n\r\n").utf8)
        sockets[fd] = s
        var event = epoll_event(events: EPOLLIN.rawValue | EPOLLOUT.rawValue | EPOLLET.rawValue, data: epoll_data_t(fd: fd))
        epoll_ctl(epfd, EPOLL_CTL_ADD, fd, &event)
        return s
    }

    /// Source addresses cycled over by `open`: 127.0.0.1 … 127.0.0.`sourceAddresses`.
    static let sourceAddresses: UInt32 = 16
    private var nextSource: UInt32 = 0

    /// Binds the socket to the next loopback source address (the port is still chosen by
    /// `connect`). From one address, the kernel's search for a free ephemeral port towards the
    /// single relay address grows with the ports in use: with ~19,000 sockets open (and the
    /// old ones in TIME_WAIT) it took 93 % of this process's CPU in the reconnect storm and
    /// paced reconnects at ~500/s. Real clients come from many addresses.
    private func bindSourceAddress(_ fd: Int32) {
        var one: Int32 = 1
        setsockopt(fd, Int32(IPPROTO_IP), IP_BIND_ADDRESS_NO_PORT, &one, socklen_t(MemoryLayout<Int32>.size))
        var source = sockaddr_in()
        source.sin_family = sa_family_t(AF_INET)
        source.sin_addr.s_addr = (UInt32(0x7f00_0001) + nextSource).bigEndian
        nextSource = (nextSource + 1) % LoadEngine.sourceAddresses
        _ = withUnsafePointer(to: &source) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
        }
    }

    func close(_ s: LoadSocket) {
        guard s.state != .closed else { return }
        s.state = .closed
        epoll_ctl(epfd, EPOLL_CTL_DEL, s.fd, nil)
        Glibc.close(s.fd)
        sockets[s.fd] = nil
    }

    func closeAll() { for s in Array(sockets.values) { close(s) } }

    /// Queues one masked client frame (zero key).
    func send(_ s: LoadSocket, text: UnsafeBufferPointer<UInt8>, opcode: UInt8 = WebSocketFrame.text) {
        s.outbox += WebSocketFrame.header(opcode: opcode, payloadLength: text.count, mask: LoadEngine.zeroMask)
        s.outbox.append(contentsOf: text)
    }

    /// A zero masking key leaves the payload as it is.
    static let zeroMask: [UInt8] = [0, 0, 0, 0]

    func flush(_ s: LoadSocket) {
        while !s.outbox.isEmpty {
            let n = s.outbox.withUnsafeBytes { Glibc.send(s.fd, $0.baseAddress!, $0.count, Int32(MSG_NOSIGNAL)) }
            if n <= 0 {
                if n < 0, errno == ECONNREFUSED { s.refused = true }  // reported to whichever call comes first
                return
            }
            s.outbox.removeFirst(n)
        }
    }

    /// Runs the loop for up to `nanoseconds`, or until `until()` is true.
    func run(for nanoseconds: UInt64, until: () -> Bool = { false }, tick: (() -> Void)? = nil) {
        let deadline = monotonicNanos() + nanoseconds
        var events = [epoll_event](repeating: epoll_event(), count: 512)
        var chunk = [UInt8](repeating: 0, count: 1 << 16)
        while monotonicNanos() < deadline, !until() {
            tick?()
            let n = epoll_wait(epfd, &events, Int32(events.count), 1)
            if n <= 0 { continue }
            for i in 0..<Int(n) {
                guard let s = sockets[events[i].data.fd] else { continue }
                if events[i].events & EPOLLOUT.rawValue != 0 { flush(s) }
                if events[i].events & (EPOLLIN.rawValue | EPOLLHUP.rawValue | EPOLLERR.rawValue) != 0 {
                    readAll(s, &chunk)
                }
            }
        }
    }

    private func readAll(_ s: LoadSocket, _ chunk: inout [UInt8]) {
        while true {
            let n = chunk.withUnsafeMutableBytes { recv(s.fd, $0.baseAddress!, $0.count, 0) }
            if n == 0 || (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK) {
                if s.state != .open {
                    handshakeFailures += 1
                    // Refused: nothing listens (a restart's gap); otherwise closed before an answer.
                    if n < 0, errno == ECONNREFUSED { s.refused = true }
                    refusals[s.refused ? "connection refused" : "no answer", default: 0] += 1
                }
                close(s)
                return
            }
            if n < 0 { break }
            s.inbox += chunk[0..<n]
        }
        process(s)
    }

    private func process(_ s: LoadSocket) {
        if s.state == .connecting || s.state == .handshaking {
            guard let end = findHeaderEnd(s.inbox) else { return }
            let ok = s.inbox.count > 12 && s.inbox[9] == UInt8(ascii: "1") && s.inbox[10] == UInt8(ascii: "0")
                && s.inbox[11] == UInt8(ascii: "1")
            if !ok {
                handshakeFailures += 1
                let status = s.inbox.count > 12 ? String(decoding: s.inbox[9..<12], as: UTF8.self) : "?"
                let code = s.inbox.withUnsafeBufferPointer { scanStringToken($0, key: "\"error\":") }
                refusals[status + (code.map { " " + String(decoding: $0, as: UTF8.self) } ?? ""), default: 0] += 1
                close(s)
                return
            }
            handshakeTimes.append(monotonicNanos() - s.startedAt)
            s.state = .open
            s.inbox.removeFirst(end)
        }
        // Parse every complete server frame (unmasked).
        var i = 0
        let count = s.inbox.count
        s.inbox.withUnsafeBufferPointer { buf in
            while let frame = WebSocketFrame.readHeader(UnsafeBufferPointer(rebasing: buf[i...])) {
                let (header, length, opcode) = (frame.size, frame.payloadLength, frame.opcode)
                guard count - i >= header + length else { break }
                let payload = UnsafeBufferPointer(rebasing: buf[(i + header)..<(i + header + length)])
                if opcode == WebSocketFrame.ping {
                    send(s, text: payload, opcode: WebSocketFrame.pong)
                    flush(s)
                } else if opcode == WebSocketFrame.close {
                    // Answer the close with its status code, as clients must (RFC 6455 §5.5.1);
                    // the relay then closes the TCP connection.
                    send(s, text: UnsafeBufferPointer(rebasing: payload.prefix(2)), opcode: WebSocketFrame.close)
                    flush(s)
                } else if opcode == WebSocketFrame.text || opcode == WebSocketFrame.binary {
                    onMessage?(s, payload)
                }
                i += header + length
            }
        }
        if i > 0 { s.inbox.removeFirst(i) }
    }

    private func findHeaderEnd(_ b: [UInt8]) -> Int? {
        guard b.count >= 4 else { return nil }
        for k in 3..<b.count where b[k] == 10 && b[k - 1] == 13 && b[k - 2] == 10 && b[k - 3] == 13 { return k + 1 }
        return nil
    }
}

/// Finds `"key":` followed by an unsigned integer in a JSON payload.
func scanNumber(_ bytes: UnsafeBufferPointer<UInt8>, key: StaticString) -> UInt64? {
    let k = UnsafeBufferPointer(start: key.utf8Start, count: key.utf8CodeUnitCount)
    guard bytes.count > k.count else { return nil }
    var i = 0
    outer: while i + k.count < bytes.count {
        for j in 0..<k.count where bytes[i + j] != k[j] {
            i += 1
            continue outer
        }
        var v: UInt64 = 0
        var p = i + k.count
        while p < bytes.count, bytes[p] >= 48, bytes[p] <= 57 {
            v = v * 10 + UInt64(bytes[p] - 48)
            p += 1
        }
        return v
    }
    return nil
}

/// The raw JSON token after `"key":` when it is a string (with its quotes), e.g. `"c12"`.
func scanStringToken(_ bytes: UnsafeBufferPointer<UInt8>, key: StaticString) -> [UInt8]? {
    let k = UnsafeBufferPointer(start: key.utf8Start, count: key.utf8CodeUnitCount)
    var i = 0
    outer: while i + k.count < bytes.count {
        for j in 0..<k.count where bytes[i + j] != k[j] {
            i += 1
            continue outer
        }
        var p = i + k.count
        guard p < bytes.count, bytes[p] == UInt8(ascii: "\"") else { return nil }
        p += 1
        while p < bytes.count, bytes[p] != UInt8(ascii: "\"") { p += 1 }
        guard p < bytes.count else { return nil }
        return Array(bytes[(i + k.count)...p])
    }
    return nil
}
