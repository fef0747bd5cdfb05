import Foundation
import Testing
import RelayCore
import RelayTestSupport

/// The operator CLI, run as a real process against a real database.
@Suite struct CLITests {
    @Test func deviceAndTokenLifecycle() throws {
        let database = try TestDatabase()
        defer { database.drop() }
        let url = database.url
        #expect(try Subprocess.cli(["device", "add", "robot-1", "--name", "Rex"], databaseURL: url).status == 0)
        let issued = try Subprocess.cli(["token", "issue", "--device", "robot-1", "--role", "robot", "--label", "field"],
                                        databaseURL: url)
        #expect(issued.status == 0)
        let secret = issued.lastLine
        #expect(secret.hasPrefix("wimz_r_") && secret.count == 50)

        let list = try Subprocess.cli(["token", "list", "--device", "robot-1"], databaseURL: url)
        #expect(list.status == 0)
        #expect(list.stdout.contains("robot-1") && list.stdout.contains("active"))
        #expect(!list.stdout.contains(secret) && !list.stdout.contains(String(secret.suffix(20))))

        let revoke = try Subprocess.cli(["token", "revoke", "1"], databaseURL: url)
        #expect(revoke.status == 0 && revoke.stdout.contains("revoked token 1"))
        #expect(try Subprocess.cli(["token", "list"], databaseURL: url).stdout.contains("revoked"))

        #expect(try Subprocess.cli(["device", "disable", "robot-1"], databaseURL: url).status == 0)
        #expect(try Subprocess.cli(["device", "list"], databaseURL: url).stdout.contains("disabled"))
        #expect(try Subprocess.cli(["device", "enable", "robot-1"], databaseURL: url).status == 0)

        let audit = try database.connect().execute("SELECT event FROM audit_log ORDER BY id").rows.map { $0[0] ?? "" }
        #expect(audit == ["device_created", "token_issued", "token_revoked", "device_disabled", "device_enabled"])
    }

    /// Each bad input: non-zero exit and exactly one clear line on stderr.
    @Test(arguments: [
        (["device", "add", "bad id!"], "invalid device id"),
        (["device", "disable", "ghost"], "unknown device ghost"),
        (["token", "issue", "--device", "ghost", "--role", "app"], "unknown device ghost"),
        (["token", "issue", "--device", "dev1", "--role", "app", "--expires-in=0"], "positive"),
        (["token", "revoke", "abc"], "invalid token id"),
        (["token", "revoke", "999"], "unknown token 999"),
        (["token", "list", "--device", "no/slash"], "invalid device id"),
    ])
    func errorPaths(_ arguments: [String], _ message: String) throws {
        let database = try TestDatabase()
        defer { database.drop() }
        #expect(try Subprocess.cli(["device", "add", "dev1"], databaseURL: database.url).status == 0)
        let result = try Subprocess.cli(arguments, databaseURL: database.url)
        #expect(result.status != 0)
        let lines = result.stderr.split(separator: "\n")
        #expect(lines.count == 1, "stderr: \(result.stderr)")
        #expect(result.stderr.contains(message), "stderr: \(result.stderr)")
    }

    @Test func duplicateDeviceIsAnError() throws {
        let database = try TestDatabase()
        defer { database.drop() }
        #expect(try Subprocess.cli(["device", "add", "dev1"], databaseURL: database.url).status == 0)
        let again = try Subprocess.cli(["device", "add", "dev1"], databaseURL: database.url)
        #expect(again.status != 0)
        #expect(again.stderr.contains("device dev1 already exists"))
    }

    @Test func unreachableOrMissingDatabaseIsOneClearLine() throws {
        let down = try Subprocess.cli(["device", "list"], databaseURL: "host=/nonexistent-wimz port=5432 user=x dbname=x")
        #expect(down.status != 0)
        #expect(down.stderr.split(separator: "\n").count == 1)
        #expect(down.stderr.contains("database unreachable"))

        let none = try Subprocess.cli(["device", "list"], databaseURL: nil)
        #expect(none.status != 0)
        #expect(none.stderr.contains("WIMZ_DATABASE_URL"))
    }

    @Test func migrateIsIdempotentFromTheCLI() throws {
        let database = try TestDatabase(migrated: false)
        defer { database.drop() }
        let first = try Subprocess.cli(["migrate"], databaseURL: database.url)
        #expect(first.status == 0 && first.stdout.contains("applied 0001_initial"))
        let second = try Subprocess.cli(["migrate"], databaseURL: database.url)
        #expect(second.status == 0 && !second.stdout.contains("applied 0001"))
    }

    /// A release older than the schema's floor (a roll back past a migration that raised it)
    /// neither migrates nor serves: it says which release it is, which the schema needs, and the
    /// way back. The household's migration set the floor to 1.1.0.
    @Test func aReleaseOlderThanTheSchemaFloorRefusesToMigrateOrServe() throws {
        let database = try TestDatabase()
        defer { database.drop() }
        let db = try database.connect()
        #expect(try db.execute("SELECT oldest_release, migration FROM release_floor").rows == [["1.1.0", "10"]])
        #expect(try Subprocess.cli(["migrate"], databaseURL: database.url).status == 0, "this release may serve it")

        // As a later release's migration would raise it.
        try db.execute("UPDATE release_floor SET oldest_release = '99.0.0', migration = 99, reason = 'a test''s reason'")
        let applied = try db.execute("SELECT count(*) FROM schema_migrations").first?[0]
        let migrate = try Subprocess.cli(["migrate"], databaseURL: database.url)
        let serve = try Subprocess.run(["/usr/bin/timeout", "30", TestEnvironment.relayBinary, "serve"], environment: [
            "WIMZ_DATABASE_URL": database.url, "WIMZ_MIGRATIONS_DIR": TestEnvironment.migrationsDirectory,
            "WIMZ_LISTEN": "127.0.0.1:0"])
        for refused in [migrate, serve] {
            #expect(refused.status == 1, "exit \(refused.status): \(refused.stderr.suffix(300))")
            for words in ["this is wimz-relay \(RelayVersion.current)", "needs 99.0.0 or newer", "migration 99, a test's reason",
                          "restore the backup taken before the upgrade"] {
                #expect(refused.stderr.contains(words), "\(words) in \(refused.stderr.suffix(400))")
            }
        }
        #expect(try db.execute("SELECT count(*) FROM schema_migrations").first?[0] == applied)
    }

    @Test func helpDocumentsEveryCommandAndSetting() throws {
        let top = try Subprocess.cli(["--help"], databaseURL: nil)
        for command in ["serve", "migrate", "device", "token"] { #expect(top.stdout.contains(command)) }
        let serve = try Subprocess.cli(["serve", "--help"], databaseURL: nil)
        for variable in ["WIMZ_DATABASE_URL", "WIMZ_LISTEN", "WIMZ_ADMIN_TOKEN", "WIMZ_TURN_URLS", "WIMZ_TURN_SECRET",
                         "WIMZ_TURN_REALM", "WIMZ_TURN_TTL", "WIMZ_TLS_CERT", "WIMZ_TLS_KEY", "WIMZ_LOG_LEVEL",
                         "WIMZ_PING_INTERVAL", "WIMZ_MAX_MESSAGE_BYTES"] {
            #expect(serve.stdout.contains(variable), "serve --help lacks \(variable)")
        }
    }

    @Test func serveTakesAStrongAdminTokenFromTheEnvironmentOrAFileNeverFromArgv() throws {
        let database = try TestDatabase()
        defer { database.drop() }
        let strong = "wimz_admin_" + String(repeating: "0123456789abcdef", count: 2)
        let refusals: [([String], [String: String], String)] = [
            (["--admin-token", strong], [:], "--admin-token is not accepted"),
            ([], ["WIMZ_ADMIN_TOKEN": "admin-secret"], "too weak"),
            ([], ["WIMZ_ADMIN_TOKEN": String(repeating: "ab", count: 40)], "too weak"),
            (["--admin-token-file", "/nonexistent/token"], [:], "cannot read the admin token file"),
        ]
        for (arguments, environment, message) in refusals {
            let result = try Subprocess.cli(["serve", "--listen", "127.0.0.1:0"] + arguments, databaseURL: database.url,
                                            environment: environment)
            #expect(result.status != 0 && result.stderr.contains(message), "\(arguments) \(environment): \(result.stderr)")
        }
        let file = FileManager.default.temporaryDirectory.appendingPathComponent("wimz-admin-\(getpid())")
        try (strong + "\n").write(to: file, atomically: true, encoding: .utf8)
        defer { try? FileManager.default.removeItem(at: file) }
        let f = try RelayFixture(arguments: ["--admin-token-file", file.path])
        #expect(try HTTPTestClient.get(port: f.port, path: "/admin/devices", headers: ["Authorization": "Bearer \(strong)"]).status == 200)
        #expect(try HTTPTestClient.get(port: f.port, path: "/admin/devices", headers: ["Authorization": "Bearer \(strong)x"]).status == 401)
    }

    /// One version source: the repository's VERSION file is what `--version` builds on, and every
    /// copy scripts/generate.sh makes of it (the Python package, the README's SwiftPM line) agrees.
    @Test func versionComesFromTheVersionFile() throws {
        let root = TestEnvironment.repositoryRoot
        let version = try String(contentsOf: root.appendingPathComponent("VERSION"), encoding: .utf8)
            .trimmingCharacters(in: .whitespacesAndNewlines)
        #expect(version.split(separator: ".").count == 3 && version.allSatisfy { $0.isNumber || $0 == "." })
        let printed = try Subprocess.run([TestEnvironment.relayBinary, "--version"])
        // The tests' build is no package's, and says so; a package says its own version (test_deb.py).
        #expect(printed.status == 0 && printed.stdout == version + "~dev\n", "\(printed.stdout)")
        let python = try String(contentsOf: root.appendingPathComponent("clients/python/wimz_robot/_version.py"), encoding: .utf8)
        #expect(python.contains("__version__ = \"\(version)\""), "run scripts/generate.sh")
        let openAPI = try JSONSerialization.jsonObject(with: Data(contentsOf: root.appendingPathComponent("docs/openapi.json")))
        #expect(((openAPI as? [String: Any])?["info"] as? [String: Any])?["version"] as? String == version, "run scripts/generate.sh")
        // CHANGELOG's newest heading is VERSION's (dated once released); the README's SwiftPM line
        // names the newest dated one, a release whose tag SwiftPM can resolve — but none before
        // 1.2.0, the first release whose app libraries have a repository of their own.
        let changelog = try String(contentsOf: root.appendingPathComponent("CHANGELOG.md"), encoding: .utf8)
        let headings = changelog.split(separator: "\n").filter { $0.hasPrefix("## ") }.map { String($0.dropFirst(3)) }
        #expect(headings.first?.hasPrefix(version + " ") == true, "CHANGELOG.md's newest entry is not \(version): \(headings.first ?? "none")")
        let released = headings.compactMap { heading -> String? in
            let parts = heading.split(separator: " ")
            guard parts.count == 3, parts[1] == "—", parts[2].count == 10, ReleaseVersion(parts[0]) != nil else { return nil }
            return String(parts[0])
        }
        let readme = try String(contentsOf: root.appendingPathComponent("README.md"), encoding: .utf8)
        let firstClientRelease = ReleaseVersion("1.2.0")!
        let named = released.first.flatMap { ReleaseVersion($0) }.map { max($0, firstClientRelease) } ?? firstClientRelease
        #expect(readme.contains("wimz-relay-client.git\", from: \"\(named)\")"), "run scripts/generate.sh")
    }
}
