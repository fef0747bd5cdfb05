import Foundation
@testable import RelayServer
import Testing

#if canImport(Glibc)
import Glibc
#endif

/// The lingering close over real loopback sockets: the server side holds a backlog the client
/// has not read yet (its last bytes stand for the close frame), the client has sent bytes the
/// server never reads (a pong), and the server side is closed as lws closes it.
@Suite struct LingeringCloserTests {
    @Test func aPlainCloseLosesTheBacklogToAReset() throws {
        let (server, client) = try connectedPair()
        defer { close(client) }
        let queued = fillSendQueue(server)
        sendPong(client)
        close(server)
        let (received, ended) = readAll(client)
        // What this type exists for: the reset threw away what was still queued.
        #expect(ended == ECONNRESET && received < queued)
    }

    @Test func aLingeringCloseDeliversEverythingThenTheFIN() throws {
        // The client is closed once, below, as part of the test: a second close here would hit
        // whatever descriptor another test running in parallel had opened under its number.
        let (server, client) = try connectedPair()
        var removed: [Int32] = []
        let closer = LingeringCloser(removeFromLoop: { removed.append($0) })
        let queued = fillSendQueue(server)
        sendPong(client)
        closer.take(server, now: 0)
        close(server)  // lws's own close of its descriptor
        #expect(removed == [server] && closer.count == 1)
        // The peer reads its backlog and answers once more on the way; the relay's ticks drop it.
        let (first, _) = readAll(client, limit: queued / 2)
        sendPong(client)
        closer.tick(now: 1)
        let (rest, ended) = readAll(client)
        #expect(first + rest == queued && ended == 0)  // every byte, then end of file: no reset
        // Once the peer closes too, the next tick lets the socket go.
        close(client)
        let deadline = Date().addingTimeInterval(5)
        while closer.count > 0, Date() < deadline {
            closer.tick(now: 2)
            usleep(1000)
        }
        #expect(closer.count == 0)
    }

    @Test func aPeerThatNeverClosesIsLetGoAfterTheGrace() throws {
        let (server, client) = try connectedPair()
        defer { close(client) }
        let closer = LingeringCloser(removeFromLoop: { _ in })
        closer.take(server, now: 1_000)
        close(server)
        closer.tick(now: 1_000 + LingeringCloser.grace - 1)
        #expect(closer.count == 1)
        closer.tick(now: 1_000 + LingeringCloser.grace)
        #expect(closer.count == 0)
        // The client sees the FIN the lingering close sent.
        #expect(readAll(client).ended == 0)
    }

    // MARK: - Sockets

    /// A connected TCP pair on loopback (server side non-blocking); the client's receive buffer
    /// is small, so most of a backlog waits in the server's send queue.
    private func connectedPair() throws -> (server: Int32, client: Int32) {
        let listener = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        defer { close(listener) }
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        var length = socklen_t(MemoryLayout<sockaddr_in>.size)
        let client = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        var small: Int32 = 16_384
        setsockopt(client, SOL_SOCKET, SO_RCVBUF, &small, socklen_t(MemoryLayout<Int32>.size))
        var timeout = timeval(tv_sec: 5, tv_usec: 0)
        setsockopt(client, SOL_SOCKET, SO_RCVTIMEO, &timeout, socklen_t(MemoryLayout<timeval>.size))
        let connected = withUnsafeMutablePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { address in
                bind(listener, address, length) == 0 && listen(listener, 1) == 0
                    && getsockname(listener, address, &length) == 0 && connect(client, address, length) == 0
            }
        }
        let server = accept(listener, nil, nil)
        guard connected, server >= 0 else {
            close(client)
            throw LingeringTestError(message: "no loopback connection: \(String(cString: strerror(errno)))")
        }
        _ = fcntl(server, F_SETFL, fcntl(server, F_GETFL) | O_NONBLOCK)
        return (server, client)
    }

    /// Writes until the kernel takes no more; returns the bytes written.
    private func fillSendQueue(_ fd: Int32) -> Int {
        let chunk = [UInt8](repeating: 0x7A, count: 65_536)
        var total = 0
        while true {
            let n = chunk.withUnsafeBytes { send(fd, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }
            guard n > 0 else { return total }
            total += n
        }
    }

    private func sendPong(_ fd: Int32) {
        let pong: [UInt8] = [0x8A, 0x84, 1, 2, 3, 4, 0x76, 0x6B, 0x6D, 0x7E]  // a masked pong frame
        _ = pong.withUnsafeBytes { send(fd, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }
    }

    /// Reads until `limit` bytes, end of file or an error: the bytes and 0 (EOF), the error, or
    /// -1 (the limit reached).
    private func readAll(_ fd: Int32, limit: Int = .max) -> (received: Int, ended: Int32) {
        var buffer = [UInt8](repeating: 0, count: 65_536)
        var received = 0
        while received < limit {
            let n = buffer.withUnsafeMutableBytes { recv(fd, $0.baseAddress, min($0.count, limit - received), 0) }
            if n == 0 { return (received, 0) }
            if n < 0 { return (received, errno) }
            received += n
        }
        return (received, -1)
    }
}

private struct LingeringTestError: Error, CustomStringConvertible {
    var message: String
    var description: String { message }
}
