import Foundation
import Testing
import RelayTestSupport

/// The event loops, and the relay's epoll sets as the kernel shows them (/proc/PID/fdinfo).
@Suite struct EventLoopTests {
    /// The default loop is libev; lws's own poll() loop stays available as a fallback.
    @Test(arguments: ["libev", "poll"])
    func relaysAndStopsCleanlyOnEitherLoop(_ loop: String) throws {
        let f = try RelayFixture(environment: ["WIMZ_EVENT_LOOP": loop])
        #expect(f.relay.log.contains { $0.contains("\"event_loop\":\"\(loop)\"") })
        let robot = try f.robot()
        _ = try robot.receiveJSON()
        let app = try f.app()
        _ = try app.receiveJSON()
        try robot.send(#"{"type":"event","event":"x","data":{}}"#)
        #expect(try app.receiveJSON().eventName == "x")
        #expect(f.relay.stop(signal: SIGTERM) == 0)
        #expect(app.waitForClose() == 1001)
    }

    /// The 101 and the connection's first message leave in one TCP segment (the gate corks
    /// the upgrade until that message is written): one packet and one wakeup less for a phone.
    @Test func theUpgradeAndTheFirstMessageShareOneSegment() throws {
        let f = try RelayFixture()
        let app = try f.app()
        #expect(try app.receiveJSON().eventName == "device_status")
        #expect(app.socket.dataSegmentsReceived == 1)
    }

    /// The gate hands each upgrade to lws as a duplicate and closes its own descriptor. Unless
    /// that descriptor is taken out of libev's epoll set first, its registration outlives it
    /// (epoll registers the open file), and the connection's next event makes libev rebuild its
    /// whole set: with 19,000 sockets a stall of ~85 ms. So every registration must name a
    /// descriptor that is open on the very socket it was registered for.
    @Test func noEpollRegistrationOutlivesItsDescriptorAfterHandovers() throws {
        let f = try RelayFixture()
        let robot = try f.robot()
        _ = try robot.receiveJSON()
        var apps: [WebSocketTestClient] = []
        for _ in 0..<3 {
            let app = try f.app()
            _ = try app.receiveJSON()  // device_status; the client sends nothing after its upgrade
            apps.append(app)
        }
        let pid = f.relay.pid
        let sets = try eventPollDescriptors(pid: pid)
        #expect(!sets.isEmpty, "libev's epoll set not found")
        var checked = 0
        for set in sets {
            for (fd, inode) in try registrations(pid: pid, pollDescriptor: set) {
                checked += 1
                var info = stat()
                let open = stat("/proc/\(pid)/fd/\(fd)", &info) == 0
                #expect(open && UInt64(info.st_ino) == inode,
                        "epoll set \(set) still holds descriptor \(fd) (socket inode \(inode)): \(open ? "reused" : "closed")")
            }
        }
        #expect(checked >= 5)  // listener, robot, three apps (and the loop's own pipes)
        _ = apps
    }

    private func eventPollDescriptors(pid: pid_t) throws -> [Int] {
        try FileManager.default.contentsOfDirectory(atPath: "/proc/\(pid)/fd").compactMap { name in
            let target = try? FileManager.default.destinationOfSymbolicLink(atPath: "/proc/\(pid)/fd/\(name)")
            return target == "anon_inode:[eventpoll]" ? Int(name) : nil
        }
    }

    /// `tfd: N events: … ino: HEX …` lines of an eventpoll descriptor's fdinfo.
    private func registrations(pid: pid_t, pollDescriptor: Int) throws -> [(fd: Int, inode: UInt64)] {
        let info = try String(contentsOfFile: "/proc/\(pid)/fdinfo/\(pollDescriptor)", encoding: .utf8)
        return info.split(separator: "\n").compactMap { line in
            let fields = line.split(whereSeparator: { $0 == " " || $0 == "\t" })
            guard fields.first == "tfd:", fields.count > 1, let fd = Int(fields[1]),
                  let ino = fields.first(where: { $0.hasPrefix("ino:") }), let inode = UInt64(ino.dropFirst(4), radix: 16)
            else { return nil }
            return (fd, inode)
        }
    }
}
