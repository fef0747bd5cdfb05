import Foundation

final class DataBox: @unchecked Sendable {
    var data = Data()
    let done = DispatchSemaphore(value: 0)
}

/// Runs programs for tests: the `wimz-relay` CLI and helper scripts.
public enum Subprocess {
    public struct Result: Sendable {
        public var status: Int32
        public var stdout: String
        public var stderr: String
        /// The last non-empty stdout line (e.g. the secret printed by `token issue`).
        public var lastLine: String {
            stdout.split(separator: "\n").last.map(String.init) ?? ""
        }
    }

    /// Runs to completion and collects output.
    public static func run(_ arguments: [String], environment: [String: String] = [:]) throws -> Result {
        let child = try ChildProcess(arguments, environment: childEnvironment(environment))
        // Read both pipes before waiting, so a chatty child cannot block on a full pipe.
        let errBox = DataBox()
        let reader = Thread { errBox.data = ChildProcess.readAll(child.stderrFD); errBox.done.signal() }
        reader.start()
        let outData = ChildProcess.readAll(child.stdoutFD)
        errBox.done.wait()
        let status = child.waitForExit()
        return Result(status: status, stdout: String(decoding: outData, as: UTF8.self),
                      stderr: String(decoding: errBox.data, as: UTF8.self))
    }

    /// The test process's environment without any database URL, plus `overrides`.
    static func childEnvironment(_ overrides: [String: String]) -> [String: String] {
        var env = ProcessInfo.processInfo.environment
        env.removeValue(forKey: "WIMZ_DATABASE_URL")
        for (k, v) in overrides { env[k] = v }
        return env
    }

    /// `wimz-relay ARGS…` against `databaseURL`.
    public static func cli(_ arguments: [String], databaseURL: String?, environment: [String: String] = [:]) throws -> Result {
        var env = environment
        if let databaseURL { env["WIMZ_DATABASE_URL"] = databaseURL }
        env["WIMZ_MIGRATIONS_DIR"] = TestEnvironment.migrationsDirectory
        return try run([TestEnvironment.relayBinary] + arguments, environment: env)
    }
}
