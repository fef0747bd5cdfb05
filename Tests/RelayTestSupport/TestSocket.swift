import Foundation

/// A blocking TCP client socket on loopback with a receive timeout, for tests.
public final class TestSocket: @unchecked Sendable {
    public let fd: Int32
    private var buffered: [UInt8] = []

    public init(port: Int, host: String = "127.0.0.1", timeout: Double = 5) throws {
        fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        guard fd >= 0 else { throw TestSetupError("socket() failed") }
        var addr = sockaddr_in()
        addr.sin_family = sa_family_t(AF_INET)
        addr.sin_port = in_port_t(UInt16(port).bigEndian)
        inet_pton(AF_INET, host, &addr.sin_addr)
        let rc = withUnsafePointer(to: &addr) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { connect(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
        }
        guard rc == 0 else {
            close(fd)
            throw TestSetupError("connect to \(host):\(port) failed: errno \(errno)")
        }
        setTimeout(timeout)
        var one: Int32 = 1
        setsockopt(fd, Int32(IPPROTO_TCP), TCP_NODELAY, &one, socklen_t(MemoryLayout<Int32>.size))
    }

    deinit { close(fd) }

    public func setTimeout(_ seconds: Double) {
        var tv = timeval(tv_sec: Int(seconds), tv_usec: Int((seconds - Double(Int(seconds))) * 1_000_000))
        setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, socklen_t(MemoryLayout<timeval>.size))
        setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, socklen_t(MemoryLayout<timeval>.size))
    }

    /// Segments carrying data this socket has received so far: `tcpi_data_segs_in` of Linux's
    /// `struct tcp_info` (since 4.6; at byte 152, a field glibc's header does not declare).
    public var dataSegmentsReceived: UInt32 {
        var info = [UInt8](repeating: 0, count: 232)
        var length = socklen_t(info.count)
        guard getsockopt(fd, Int32(IPPROTO_TCP), TCP_INFO, &info, &length) == 0, length >= 156 else { return 0 }
        return info.withUnsafeBytes { $0.load(fromByteOffset: 152, as: UInt32.self) }
    }

    /// Shrinks the kernel receive buffer (slow-consumer tests).
    public func setReceiveBuffer(_ bytes: Int32) {
        var size = bytes
        setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &size, socklen_t(MemoryLayout<Int32>.size))
    }

    public func send(_ bytes: [UInt8]) throws {
        var offset = 0
        while offset < bytes.count {
            let n = bytes.withUnsafeBytes { Glibc.send(fd, $0.baseAddress! + offset, bytes.count - offset, Int32(MSG_NOSIGNAL)) }
            guard n > 0 else { throw TestSetupError("send failed: errno \(errno)") }
            offset += n
        }
    }

    public func send(_ text: String) throws { try send(Array(text.utf8)) }

    /// Reads exactly `count` bytes, or throws on timeout/EOF.
    public func read(exactly count: Int) throws -> [UInt8] {
        while buffered.count < count {
            try fill()
        }
        let out = Array(buffered.prefix(count))
        buffered.removeFirst(count)
        return out
    }

    /// Reads up to and including `delimiter`.
    public func read(until delimiter: [UInt8], limit: Int = 1 << 20) throws -> [UInt8] {
        while true {
            if let range = find(delimiter) {
                let out = Array(buffered[..<range])
                buffered.removeFirst(range)
                return out
            }
            guard buffered.count < limit else { throw TestSetupError("no delimiter within \(limit) bytes") }
            try fill()
        }
    }

    /// Reads whatever remains until EOF (or timeout).
    public func readToEnd() -> [UInt8] {
        while (try? fill()) != nil {}
        defer { buffered.removeAll() }
        return buffered
    }

    /// True once the peer has closed (EOF) or reset, within `timeout`.
    public func waitForEOF(timeout: Double) -> Bool {
        setTimeout(timeout)
        while true {
            do { try fill() } catch let e as SocketClosed { _ = e; return true } catch { return false }
        }
    }

    struct SocketClosed: Error {}

    private func fill() throws {
        var chunk = [UInt8](repeating: 0, count: 65536)
        let n = chunk.withUnsafeMutableBytes { recv(fd, $0.baseAddress!, $0.count, 0) }
        if n == 0 { throw SocketClosed() }
        if n < 0 {
            if errno == ECONNRESET { throw SocketClosed() }
            throw TestSetupError("recv timed out or failed: errno \(errno)")
        }
        buffered += chunk[0..<n]
    }

    private func find(_ delimiter: [UInt8]) -> Int? {
        guard buffered.count >= delimiter.count else { return nil }
        for i in 0...(buffered.count - delimiter.count) where buffered[i] == delimiter[0] {
            if Array(buffered[i..<i + delimiter.count]) == delimiter { return i + delimiter.count }
        }
        return nil
    }
}

/// One HTTP/1.1 response.
public struct HTTPTestResponse: Sendable {
    /// The status line's protocol, e.g. "HTTP/1.1".
    public var version: String
    public var status: Int
    public var headers: [String: String]
    public var body: [UInt8]
    public var text: String { String(decoding: body, as: UTF8.self) }

    /// The body parsed as a JSON object.
    public func json() throws -> [String: Any] {
        guard let object = try JSONSerialization.jsonObject(with: Data(body)) as? [String: Any] else {
            throw TestSetupError("body is not a JSON object: \(text)")
        }
        return object
    }
}

/// Minimal HTTP/1.1 client over a real socket (Content-Length bodies only).
public enum HTTPTestClient {
    public static func request(port: Int, method: String = "GET", path: String, headers: [String: String] = [:],
                               body: [UInt8] = []) throws -> HTTPTestResponse {
        let socket = try TestSocket(port: port)
        var head = "\(method) \(path) HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n"
        for (k, v) in headers { head += "\(k): \(v)\r\n" }
        if !body.isEmpty || method == "POST" || method == "PUT" { head += "Content-Length: \(body.count)\r\n" }
        head += "\r\n"
        try socket.send(Array(head.utf8) + body)
        return try readResponse(socket)
    }

    public static func get(port: Int, path: String, headers: [String: String] = [:]) throws -> HTTPTestResponse {
        try request(port: port, path: path, headers: headers)
    }

    /// Reads a status line, headers and a Content-Length body.
    public static func readResponse(_ socket: TestSocket) throws -> HTTPTestResponse {
        let head = String(decoding: try socket.read(until: Array("\r\n\r\n".utf8)), as: UTF8.self)
        var lines = head.components(separatedBy: "\r\n")
        let statusLine = lines.removeFirst().split(separator: " ")
        guard statusLine.count >= 2, let status = Int(statusLine[1]) else {
            throw TestSetupError("bad status line in \(head)")
        }
        var headers: [String: String] = [:]
        for line in lines where line.contains(":") {
            let parts = line.split(separator: ":", maxSplits: 1)
            headers[parts[0].lowercased()] = parts[1].trimmingCharacters(in: .whitespaces)
        }
        let length = Int(headers["content-length"] ?? "0") ?? 0
        let body = length > 0 ? try socket.read(exactly: length) : []
        return HTTPTestResponse(version: String(statusLine[0]), status: status, headers: headers, body: body)
    }
}
