import Foundation

/// A real coturn (`turnserver`) on a loopback port, in REST-secret mode, and allocations
/// through `turnutils_uclient` (Debian package `coturn`).
public final class TurnServer: @unchecked Sendable {
    public let port: Int
    public let process: ChildProcess
    public let logPath: String

    /// `staticSecret` for `static-auth-secret`, or `psqlUserDB` (a libpq conninfo) to read
    /// secrets live from `turn_secret`.
    public init(realm: String = "wimz", staticSecret: String? = nil, psqlUserDB: String? = nil) throws {
        let dir = try TestEnvironment.scratchDirectory("coturn")
        logPath = dir + "/turnserver.log"
        var lastError = ""
        for _ in 0..<5 {
            let port = Int.random(in: 20000...40000)
            let relayBase = Int.random(in: 41000...60000)
            var args = ["/usr/bin/turnserver", "-n", "--listening-ip=127.0.0.1", "--relay-ip=127.0.0.1",
                        "--listening-port=\(port)", "--use-auth-secret", "--realm=\(realm)", "--no-tls", "--no-dtls",
                        "--no-cli", "--allow-loopback-peers", "--log-file=\(logPath)", "--simple-log",
                        "--pidfile=\(dir)/turnserver.pid", "--min-port=\(relayBase)", "--max-port=\(relayBase + 200)"]
            if let staticSecret { args.append("--static-auth-secret=\(staticSecret)") }
            if let psqlUserDB { args.append("--psql-userdb=\(psqlUserDB)") }
            let child = try ChildProcess(args, environment: ProcessInfo.processInfo.environment, mergeStderr: true)
            // Ready once it answers a (failing) allocation rather than a timeout.
            let deadline = Date().addingTimeInterval(5)
            while Date() < deadline, child.isRunning {
                let log = (try? String(contentsOfFile: logPath, encoding: .utf8)) ?? ""
                if log.contains("Total General servers") || log.contains("IPv4. UDP listener opened") { break }
                usleep(50_000)
            }
            usleep(200_000)
            if child.isRunning {
                self.port = port
                self.process = child
                return
            }
            lastError = (try? String(contentsOfFile: logPath, encoding: .utf8)) ?? "turnserver exited"
        }
        throw TestSetupError("turnserver did not start: \(lastError.suffix(500))")
    }

    /// True when a TURN allocation (and a short exchange through it) succeeds with these credentials.
    public func allocates(username: String, credential: String) throws -> Bool {
        // -c -I -z 1: no RTCP, no permissions, 1 ms pacing — the quickest full allocation + exchange.
        let result = try Subprocess.run(["/usr/bin/turnutils_uclient", "-c", "-y", "-I", "-z", "1", "-n", "1", "-m", "1", "-l", "64",
                                         "-u", username, "-w", credential, "-p", String(port), "127.0.0.1"])
        return result.status == 0
    }

    deinit {
        kill(process.pid, SIGTERM)
        process.waitForExit()
    }
}
