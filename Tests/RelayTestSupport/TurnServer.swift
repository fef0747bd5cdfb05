import Foundation

/// A real coturn (`turnserver`) on a loopback port, in REST-secret mode, and allocations
/// through `turnutils_uclient` (Debian package `coturn`).
public final class TurnServer: @unchecked Sendable {
    public let port: Int
    public let process: ChildProcess
    public let logPath: String

    /// `staticSecret` for `static-auth-secret`, or `psqlUserDB` (a libpq conninfo) to read
    /// secrets live from `turn_secret`.
    /// `ports` are tried first, in order (tests of this start-up itself), before random ones.
    public init(realm: String = "wimz", staticSecret: String? = nil, psqlUserDB: String? = nil, ports: [Int] = []) throws {
        let dir = try TestEnvironment.scratchDirectory("coturn")
        logPath = dir + "/turnserver.log"
        var lastError = ""
        for attempt in 0..<5 {
            // Below Linux's ephemeral range (32768–60999), where every test's client sockets and
            // listeners on port 0 take theirs: a port in use there would not fail coturn, which
            // keeps running and retries the bind (`listens(pid:port:)` below catches that).
            let port = attempt < ports.count ? ports[attempt] : Int.random(in: 20000...32000)
            try? FileManager.default.removeItem(atPath: logPath)  // (an earlier attempt's "Cannot bind")
            let relayBase = Int.random(in: 41000...60000)
            var args = ["/usr/bin/turnserver", "-n", "--listening-ip=127.0.0.1", "--relay-ip=127.0.0.1",
                        "--listening-port=\(port)", "--use-auth-secret", "--realm=\(realm)", "--no-tls", "--no-dtls",
                        "--no-cli", "--allow-loopback-peers", "--log-file=\(logPath)", "--simple-log",
                        "--pidfile=\(dir)/turnserver.pid", "--min-port=\(relayBase)", "--max-port=\(relayBase + 200)"]
            if let staticSecret { args.append("--static-auth-secret=\(staticSecret)") }
            if let psqlUserDB { args.append("--psql-userdb=\(psqlUserDB)") }
            let child = try ChildProcess(args, environment: ProcessInfo.processInfo.environment, mergeStderr: true)
            // Ready once its own UDP and TCP listeners are open on the port; a failed bind is
            // logged (and retried for ever).
            let deadline = Date().addingTimeInterval(5)
            while Date() < deadline, child.isRunning, !TurnServer.listens(pid: child.pid, port: port),
                  !((try? String(contentsOfFile: logPath, encoding: .utf8))?.contains("Cannot bind") ?? false) {
                usleep(20_000)
            }
            if child.isRunning, TurnServer.listens(pid: child.pid, port: port) {
                self.port = port
                self.process = child
                return
            }
            lastError = (try? String(contentsOfFile: logPath, encoding: .utf8)) ?? "turnserver exited"
            kill(child.pid, SIGKILL)
            child.waitForExit()
        }
        throw TestSetupError("turnserver did not start: \(lastError.suffix(500))")
    }

    /// Whether process `pid` holds a UDP socket and a listening TCP socket on 127.0.0.1:`port`
    /// (`/proc/net/udp` and `/proc/net/tcp` rows whose inodes are among its descriptors).
    static func listens(pid: pid_t, port: Int) -> Bool {
        let ownSockets = Set(((try? FileManager.default.contentsOfDirectory(atPath: "/proc/\(pid)/fd")) ?? []).compactMap {
            try? FileManager.default.destinationOfSymbolicLink(atPath: "/proc/\(pid)/fd/\($0)")
        })
        // Rows: "sl local_address rem_address st … inode"; 0100007F:PORT is 127.0.0.1 (hex), TCP state 0A is LISTEN.
        let local = "0100007F:" + String(format: "%04X", port)
        func holds(_ table: String, state: String?) -> Bool {
            let text = (try? String(contentsOfFile: table, encoding: .utf8)) ?? ""
            return text.split(separator: "\n").dropFirst().contains { row in
                let fields = row.split(separator: " ")
                return fields.count > 9 && fields[1] == local && (state == nil || fields[3] == state!)
                    && ownSockets.contains("socket:[\(fields[9])]")
            }
        }
        return holds("/proc/net/udp", state: nil) && holds("/proc/net/tcp", state: "0A")
    }

    /// True when a TURN allocation (and a short exchange through it) succeeds with these credentials.
    public func allocates(username: String, credential: String) throws -> Bool {
        // -c -I -z 1: no RTCP, no permissions, 1 ms pacing — the quickest full allocation + exchange.
        // (It waits for ever on a coturn that is gone: bounded here, a failed allocation then.)
        let result = try Subprocess.run(["/usr/bin/timeout", "20", "/usr/bin/turnutils_uclient", "-c", "-y", "-I", "-z", "1", "-n", "1", "-m", "1", "-l", "64",
                                         "-u", username, "-w", credential, "-p", String(port), "127.0.0.1"])
        return result.status == 0
    }

    deinit {
        kill(process.pid, SIGTERM)
        process.waitForExit()
    }
}
