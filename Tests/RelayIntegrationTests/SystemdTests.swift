import Foundation
import Testing
import RelayTestSupport

/// A datagram socket standing in for systemd's notify socket.
final class NotifySocket {
    let fd: Int32
    let path: String

    init() throws {
        path = try TestEnvironment.scratchDirectory("notify") + "/notify.sock"
        fd = socket(AF_UNIX, Int32(SOCK_DGRAM.rawValue), 0)
        var addr = sockaddr_un()
        addr.sun_family = sa_family_t(AF_UNIX)
        withUnsafeMutableBytes(of: &addr.sun_path) { raw in
            for (i, b) in path.utf8.enumerated() { raw[i] = b }
        }
        let rc = withUnsafePointer(to: &addr) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(fd, $0, socklen_t(MemoryLayout<sockaddr_un>.size)) }
        }
        guard rc == 0 else { throw TestSetupError("bind \(path) failed") }
        var tv = timeval(tv_sec: 10, tv_usec: 0)
        setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, socklen_t(MemoryLayout<timeval>.size))
    }

    deinit { close(fd) }

    /// The next datagram (nil on timeout).
    func next() -> String? {
        var buffer = [UInt8](repeating: 0, count: 4096)
        let n = recv(fd, &buffer, buffer.count, 0)
        return n > 0 ? String(decoding: buffer[0..<n], as: UTF8.self) : nil
    }
}

@Suite struct SystemdTests {
    @Test func notifiesReadyWatchdogAndStopping() throws {
        let database = try TestDatabase()
        defer { database.drop() }
        let notify = try NotifySocket()
        let relay = try RelayDaemon(databaseURL: database.url,
                                    environment: ["NOTIFY_SOCKET": notify.path, "WATCHDOG_USEC": "2000000"])
        let first = notify.next()
        #expect(first?.contains("READY=1") == true)
        // Ready means the database answered: /readyz agrees at that moment.
        #expect(try HTTPTestClient.get(port: relay.port, path: "/readyz").status == 200)
        var sawWatchdog = false
        for _ in 0..<3 where !sawWatchdog { sawWatchdog = notify.next() == "WATCHDOG=1" }
        #expect(sawWatchdog)
        kill(relay.pid, SIGTERM)
        var sawStopping = false
        for _ in 0..<5 where !sawStopping { sawStopping = notify.next()?.contains("STOPPING=1") == true }
        #expect(sawStopping)
        #expect(relay.stop() == 0)
    }

    @Test func notReadyUntilTheDatabaseAnswers() throws {
        let notify = try NotifySocket()
        var tv = timeval(tv_sec: 2, tv_usec: 0)
        setsockopt(notify.fd, SOL_SOCKET, SO_RCVTIMEO, &tv, socklen_t(MemoryLayout<timeval>.size))
        let relay = try RelayDaemon(databaseURL: "host=/nonexistent-wimz port=5432 user=x dbname=x",
                                    environment: ["NOTIFY_SOCKET": notify.path])
        #expect(notify.next() == nil)
        relay.stop()
    }
}
