import Foundation
import Synchronization

/// Log lines collected from a child process's output.
public final class LockedLines: Sendable {
    private let storage = Mutex<[String]>([])
    public init() {}
    public func withLock<T>(_ body: (inout [String]) -> T) -> T { storage.withLock { body(&$0) } }
}

/// A `wimz-relay serve` process on a free loopback port, with its log lines collected.
public final class RelayDaemon: @unchecked Sendable {
    public let process: ChildProcess
    public private(set) var port: Int = 0
    private let lines = LockedLines()
    private let reader = DispatchGroup()

    /// Starts the daemon and waits until it listens. `environment` adds/overrides `WIMZ_*`.
    public init(databaseURL: String, arguments: [String] = [], environment: [String: String] = [:]) throws {
        var env: [String: String] = [
            "WIMZ_DATABASE_URL": databaseURL,
            "WIMZ_MIGRATIONS_DIR": TestEnvironment.migrationsDirectory,
            "WIMZ_SPOOL_DIR": try TestEnvironment.scratchDirectory("spool"),
        ]
        for (k, v) in environment { env[k] = v }
        process = try ChildProcess([TestEnvironment.relayBinary, "serve", "--listen", "127.0.0.1:0"] + arguments,
                                   environment: Subprocess.childEnvironment(env), mergeStderr: true)
        let fd = process.stdoutFD
        reader.enter()
        Thread.detachNewThread { [lines, reader] in
            var pending = Data()
            var chunk = [UInt8](repeating: 0, count: 65536)
            while true {
                let n = read(fd, &chunk, chunk.count)
                if n < 0, errno == EINTR { continue }
                if n <= 0 { break }
                pending.append(contentsOf: chunk[0..<n])
                while let newline = pending.firstIndex(of: 0x0A) {
                    let line = String(decoding: pending[pending.startIndex..<newline], as: UTF8.self)
                    pending.removeSubrange(pending.startIndex...newline)
                    lines.withLock { $0.append(line) }
                }
            }
            reader.leave()
        }
        guard let listening = waitForLog(containing: "\"event\":\"listening\"", timeout: 15),
              let range = listening.range(of: #"127\.0\.0\.1:(\d+)"#, options: .regularExpression),
              let port = Int(listening[range].split(separator: ":").last ?? "")
        else {
            kill(process.pid, SIGKILL)
            throw TestSetupError("relay did not start listening; log:\n\(log.joined(separator: "\n"))")
        }
        self.port = port
    }

    /// Every line logged so far.
    public var log: [String] { lines.withLock { $0 } }

    /// Waits for a log line containing `text`, returning it (nil on timeout).
    @discardableResult
    public func waitForLog(containing text: String, after index: Int = 0, timeout: Double = 10) -> String? {
        let deadline = Date().addingTimeInterval(timeout)
        while Date() < deadline {
            if let line = lines.withLock({ $0.dropFirst(index).first { $0.contains(text) } }) { return line }
            if !process.isRunning, lines.withLock({ $0.dropFirst(index).first { $0.contains(text) } }) == nil {
                return nil
            }
            usleep(20_000)
        }
        return nil
    }

    /// Waits until `count` log lines satisfy `match` (a line reaches our pipe reader after the
    /// answer it records has reached the client), returning those seen by then, fewer on timeout.
    public func waitForLogLines(count: Int, timeout: Double = 10, where match: (String) -> Bool) -> [String] {
        let deadline = Date().addingTimeInterval(timeout)
        while true {
            let matching = lines.withLock { $0.filter(match) }
            if matching.count >= count || Date() >= deadline { return matching }
            usleep(20_000)
        }
    }

    /// Waits until `/readyz` answers 200.
    public func waitUntilReady(timeout: Double = 15) throws {
        let deadline = Date().addingTimeInterval(timeout)
        while Date() < deadline {
            if let r = try? HTTPTestClient.get(port: port, path: "/readyz"), r.status == 200 { return }
            usleep(50_000)
        }
        throw TestSetupError("relay never became ready; log:\n\(log.joined(separator: "\n"))")
    }

    /// Sends `signal` and waits for exit; returns the exit status.
    @discardableResult
    public func stop(signal: Int32 = SIGTERM, timeout: Double = 15) -> Int32 {
        if process.isRunning { kill(process.pid, signal) }
        let deadline = Date().addingTimeInterval(timeout)
        while process.isRunning, Date() < deadline { usleep(20_000) }
        if process.isRunning { kill(process.pid, SIGKILL) }
        let status = process.waitForExit()
        reader.wait()
        return status
    }

    /// The daemon's process id (for signals sent by tests).
    public var pid: pid_t { process.pid }
}
