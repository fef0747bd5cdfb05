import Foundation
import RelayStore

/// Where things are for tests. `scripts/test.sh` provides the database; the paths come from
/// the build layout.
public enum TestEnvironment {
    /// The repository root (from this file's location).
    public static let repositoryRoot: URL = URL(fileURLWithPath: #filePath)
        .deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()

    public static var migrationsDirectory: String { repositoryRoot.appendingPathComponent("migrations").path }

    /// The built `wimz-relay` executable, next to the test bundle.
    public static var relayBinary: String {
        let bundle = URL(fileURLWithPath: CommandLine.arguments[0]).resolvingSymlinksInPath()
        var dir = bundle.deletingLastPathComponent()
        // swift-testing's runner may be the .xctest file itself or a helper beside it.
        for _ in 0..<3 {
            let candidate = dir.appendingPathComponent("wimz-relay")
            if FileManager.default.isExecutableFile(atPath: candidate.path) { return candidate.path }
            dir = dir.deletingLastPathComponent()
        }
        return repositoryRoot.appendingPathComponent(".build/debug/wimz-relay").path
    }

    /// The admin conninfo of the test cluster.
    public static func adminURL() throws -> String {
        guard let url = ProcessInfo.processInfo.environment["WIMZ_TEST_DATABASE_URL"], !url.isEmpty else {
            throw TestSetupError("WIMZ_TEST_DATABASE_URL is not set: run the suite with scripts/test.sh")
        }
        return url
    }

    /// A scratch directory for this test run.
    public static func scratchDirectory(_ name: String) throws -> String {
        let base = ProcessInfo.processInfo.environment["WIMZ_TEST_WORKDIR"] ?? NSTemporaryDirectory()
        let dir = URL(fileURLWithPath: base).appendingPathComponent("\(name)-\(UUID().uuidString.prefix(8))")
        try FileManager.default.createDirectory(at: dir, withIntermediateDirectories: true)
        return dir.path
    }

    public static func migrator() throws -> Migrator {
        Migrator(migrations: try Migration.load(from: migrationsDirectory))
    }
}

public struct TestSetupError: Error, CustomStringConvertible {
    public var description: String
    public init(_ description: String) { self.description = description }
}

/// A fresh database per test in the shared test cluster, dropped by `drop()`.
public final class TestDatabase: @unchecked Sendable {
    public let name: String
    public let url: String
    private let adminURL: String

    /// Creates an empty database; `migrated` applies every migration.
    public init(migrated: Bool = true) throws {
        adminURL = try TestEnvironment.adminURL()
        name = "wimz_t_" + UUID().uuidString.replacingOccurrences(of: "-", with: "").prefix(16).lowercased()
        let admin = try PGConnection(conninfo: adminURL)
        try admin.execute("CREATE DATABASE \(identifier: name)")
        url = TestDatabase.replacingDatabase(in: adminURL, with: name)
        if migrated { try TestEnvironment.migrator().migrate(try connect()) }
    }

    public func connect() throws -> PGConnection { try PGConnection(conninfo: url) }

    public func drop() {
        guard let admin = try? PGConnection(conninfo: adminURL) else { return }
        _ = try? admin.execute("DROP DATABASE IF EXISTS \(identifier: name) WITH (FORCE)")
    }

    static func replacingDatabase(in conninfo: String, with name: String) -> String {
        let parts = conninfo.split(separator: " ").filter { !$0.hasPrefix("dbname=") }
        return (parts + ["dbname=\(name)"]).joined(separator: " ")
    }
}

/// A private PostgreSQL cluster a test can stop and start (database outages).
public final class PrivateCluster: @unchecked Sendable {
    public let directory: String
    public private(set) var url: String = ""

    public init() throws {
        directory = try TestEnvironment.scratchDirectory("pg")
        try start()
    }

    public func start() throws {
        let result = try Subprocess.run([TestEnvironment.repositoryRoot.appendingPathComponent("scripts/pg-cluster.sh").path,
                                         "start", directory])
        guard result.status == 0 else { throw TestSetupError("private cluster did not start: \(result.stderr)") }
        url = result.stdout.trimmingCharacters(in: .whitespacesAndNewlines)
    }

    public func stop() throws {
        _ = try Subprocess.run([TestEnvironment.repositoryRoot.appendingPathComponent("scripts/pg-cluster.sh").path,
                                "stop", directory, "immediate"])
    }

    deinit { try? stop() }
}
