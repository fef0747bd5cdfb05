import RelayCore

#if canImport(Glibc)
import Glibc
#endif

/// A client of coturn's management CLI (the telnet-style interface of `cli-ip`/`cli-port`,
/// 5766 by default), for the two commands a removal needs: `ps <username>` (the sessions of one
/// exact username) and `cs <session-id>` (cancel one). The conversation, as coturn 4.6 speaks it:
///
///     ← "TURN Server\r\n…Type '?' for help\r\nEnter password: \r\n"   (only with cli-password)
///     → "<password>\r\n"
///     ← "> "
///     → "ps 1795400000:robot-42/17\r\n"
///     ← "\r\n    1) id=001000000000000002, user <1795400000:robot-42/17>:\r\n …  Total sessions: 1\r\n\r\n> "
///     → "cs 001000000000000002\r\n"
///     ← "> "
///
/// Blocking I/O with deadlines: used only by the cutter's own thread.
public final class CoturnCLI {
    public struct Failure: Error, CustomStringConvertible {
        public let description: String
        init(_ description: String) { self.description = description }
    }

    private let fd: Int32
    /// Per exchange.
    private let timeoutMilliseconds: Int32

    /// Connects to `host:port` and logs in with `password` (nil: a CLI without one).
    public init(host: String, port: UInt16, password: String?, timeoutMilliseconds: Int32 = 2000) throws {
        self.timeoutMilliseconds = timeoutMilliseconds
        fd = try CoturnCLI.connect(host: host, port: port, timeoutMilliseconds: timeoutMilliseconds)
        do {
            let banner = try readUntilPrompt(accepting: ["Enter password: \r\n", "Enter password: ", "> "])
            if banner.contains("Enter password") {
                guard let password else { throw Failure("the TURN CLI asks for a password; set WIMZ_TURN_ADMIN_PASSWORD(_FILE)") }
                try send(password + "\r\n")
                do { _ = try readUntilPrompt(accepting: ["> "]) } catch { throw Failure("the TURN CLI refused the password") }
            }
        } catch {
            close(fd)
            throw error
        }
    }

    deinit { close(fd) }

    /// The ids of the sessions of exactly `username` (coturn's `ps` matches whole usernames; the
    /// listing is checked again here).
    public func sessions(of username: String) throws -> [String] {
        guard CoturnCLI.isSafe(username) else { throw Failure("a username the CLI can't take: \(username.debugDescription)") }
        try send("ps \(username)\r\n")
        return CoturnCLI.sessionIDs(in: try readUntilPrompt(accepting: ["> "]), username: username)
    }

    /// Cancels session `id`.
    public func cancel(session id: String) throws {
        guard !id.isEmpty, id.allSatisfy(\.isNumber) else { throw Failure("not a session id: \(id)") }
        try send("cs \(id)\r\n")
        _ = try readUntilPrompt(accepting: ["> "])
    }

    /// `N) id=ID, user <NAME>:` lines of a `ps` listing whose NAME is `username`.
    static func sessionIDs(in listing: String, username: String) -> [String] {
        var ids: [String] = []
        for line in listing.split(whereSeparator: \.isNewline) {  // ("\r\n" is one Character)
            guard let idStart = line.range(of: "id="), let userStart = line.range(of: ", user <"),
                  idStart.upperBound <= userStart.lowerBound, line.hasSuffix(">:") else { continue }
            let id = line[idStart.upperBound..<userStart.lowerBound]
            let name = line[userStart.upperBound..<line.index(line.endIndex, offsetBy: -2)]
            if name == username, !id.isEmpty, id.allSatisfy(\.isNumber) { ids.append(String(id)) }
        }
        return ids
    }

    /// Printable ASCII without spaces: what a TURN REST username of the relay's is, and all the
    /// CLI's line reader takes as one argument.
    static func isSafe(_ text: String) -> Bool {
        !text.isEmpty && text.utf8.count <= 512 && text.utf8.allSatisfy { $0 > 0x20 && $0 < 0x7F }
    }

    // MARK: - Socket

    private static func connect(host: String, port: UInt16, timeoutMilliseconds: Int32) throws -> Int32 {
        var hints = addrinfo()
        hints.ai_socktype = Int32(SOCK_STREAM.rawValue)
        var list: UnsafeMutablePointer<addrinfo>?
        guard getaddrinfo(host, String(port), &hints, &list) == 0, let first = list else {
            throw Failure("cannot resolve \(host)")
        }
        defer { freeaddrinfo(list) }
        var lastError = "no address"
        var entry: UnsafeMutablePointer<addrinfo>? = first
        while let info = entry {
            entry = info.pointee.ai_next
            let fd = socket(info.pointee.ai_family, info.pointee.ai_socktype | Int32(SOCK_CLOEXEC.rawValue) | Int32(SOCK_NONBLOCK.rawValue), 0)
            guard fd >= 0 else { continue }
            if Glibc.connect(fd, info.pointee.ai_addr, info.pointee.ai_addrlen) == 0 || errno == EINPROGRESS {
                var p = pollfd(fd: fd, events: Int16(POLLOUT), revents: 0)
                var soError: Int32 = 0
                var length = socklen_t(MemoryLayout<Int32>.size)
                if poll(&p, 1, timeoutMilliseconds) == 1, getsockopt(fd, SOL_SOCKET, SO_ERROR, &soError, &length) == 0, soError == 0 {
                    return fd
                }
                lastError = soError != 0 ? String(cString: strerror(soError)) : "timed out"
            } else {
                lastError = String(cString: strerror(errno))
            }
            close(fd)
        }
        throw Failure("cannot connect to \(host):\(port): \(lastError)")
    }

    private func send(_ text: String) throws {
        var bytes = Array(text.utf8)[...]
        while !bytes.isEmpty {
            var p = pollfd(fd: fd, events: Int16(POLLOUT), revents: 0)
            guard poll(&p, 1, timeoutMilliseconds) == 1 else { throw Failure("the TURN CLI does not take input") }
            let sent = bytes.withUnsafeBytes { Glibc.send(fd, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }
            if sent < 0 {
                if errno == EAGAIN || errno == EINTR { continue }
                throw Failure("the TURN CLI connection failed: \(String(cString: strerror(errno)))")
            }
            bytes = bytes.dropFirst(sent)
        }
    }

    /// Reads until the text ends with one of `endings` (at most 1 MiB, within the timeout).
    private func readUntilPrompt(accepting endings: [String]) throws -> String {
        var received: [UInt8] = []
        var buffer = [UInt8](repeating: 0, count: 4096)
        let deadline = MonotonicClock.nanoseconds() + UInt64(timeoutMilliseconds) * 1_000_000
        while true {
            let text = String(decoding: received, as: UTF8.self)
            if endings.contains(where: { text.hasSuffix($0) }) { return text }
            let now = MonotonicClock.nanoseconds()
            guard now < deadline, received.count < 1 << 20 else { throw Failure("no prompt from the TURN CLI") }
            var p = pollfd(fd: fd, events: Int16(POLLIN), revents: 0)
            guard poll(&p, 1, Int32((deadline - now) / 1_000_000) + 1) == 1 else { continue }
            let count = buffer.withUnsafeMutableBytes { recv(fd, $0.baseAddress, $0.count, 0) }
            if count == 0 { throw Failure("the TURN CLI closed the connection") }
            if count < 0 {
                if errno == EAGAIN || errno == EINTR { continue }
                throw Failure("the TURN CLI connection failed: \(String(cString: strerror(errno)))")
            }
            received += buffer[..<count]
        }
    }
}
