import Foundation
import Testing
import RelayServer
import RelayTestSupport

/// `serve` over real sockets: health, readiness and a clean stop.
@Suite struct HealthTests {
    @Test func healthAndReadinessWithAHealthyDatabase() throws {
        let database = try TestDatabase()
        defer { database.drop() }
        let relay = try RelayDaemon(databaseURL: database.url)
        try relay.waitUntilReady()
        let health = try HTTPTestClient.get(port: relay.port, path: "/healthz")
        #expect(health.status == 200)
        #expect(try health.json()["status"] as? String == "ok")
        #expect(try health.json()["version"] as? String == RelayBuild.version)
        let ready = try HTTPTestClient.get(port: relay.port, path: "/readyz")
        #expect(ready.status == 200)
        #expect(ready.headers["content-type"] == "application/json")
        let missing = try HTTPTestClient.get(port: relay.port, path: "/nope?token=wimz_a_secretvalue")
        #expect(missing.status == 404)
        #expect(try missing.json()["error"] as? String == "not_found")

        #expect(relay.stop(signal: SIGTERM) == 0)
        let log = relay.log
        #expect(log.contains { $0.contains("\"event\":\"http_request\"") && $0.contains("\"path\":\"/healthz\"") })
        #expect(!log.joined().contains("wimz_a_secretvalue"))
        #expect(log.last?.contains("\"event\":\"stopped\"") == true)
    }

    /// The process's descriptor limit (and with it lws's table, which lws scans at every close)
    /// is what `--max-descriptors` says, lowered as well as raised, and never past the hard limit;
    /// the kernel's descriptor table is that size from the start (`FDSize`), so a storm of
    /// sockets never waits for it to grow.
    @Test func descriptorLimitIsTheConfiguredOne() throws {
        let database = try TestDatabase()
        defer { database.drop() }
        func openFilesLimit(_ relay: RelayDaemon) throws -> (soft: String, hard: String)? {
            let limits = try String(contentsOfFile: "/proc/\(relay.process.pid)/limits", encoding: .utf8)
            guard let line = limits.split(separator: "\n").first(where: { $0.hasPrefix("Max open files") }) else { return nil }
            let fields = line.split(separator: " ")
            return (String(fields[3]), String(fields[4]))
        }
        func kernelTableSize(_ relay: RelayDaemon) throws -> Int? {
            let status = try String(contentsOfFile: "/proc/\(relay.process.pid)/status", encoding: .utf8)
            return status.split(separator: "\n").first { $0.hasPrefix("FDSize:") }.flatMap { Int($0.dropFirst(7).trimmingCharacters(in: .whitespaces)) }
        }
        let small = try RelayDaemon(databaseURL: database.url, arguments: ["--max-descriptors", "2048"])
        try small.waitUntilReady()
        let limit = try #require(try openFilesLimit(small))
        #expect(limit.soft == "2048")
        #expect(try #require(try kernelTableSize(small)) >= 2048)
        #expect(small.stop(signal: SIGTERM) == 0)

        let standard = try RelayDaemon(databaseURL: database.url)
        try standard.waitUntilReady()
        let defaults = try #require(try openFilesLimit(standard))
        #expect(Int(defaults.soft) == min(65_536, Int(defaults.hard) ?? Int.max))
        #expect(try #require(try kernelTableSize(standard)) >= Int(defaults.soft) ?? .max)
        #expect(standard.stop(signal: SIGTERM) == 0)
    }

    @Test func notReadyWhenMigrationsArePending() throws {
        let database = try TestDatabase(migrated: false)
        defer { database.drop() }
        let relay = try RelayDaemon(databaseURL: database.url)
        relay.waitForLog(containing: "schema_outdated")
        let ready = try HTTPTestClient.get(port: relay.port, path: "/readyz")
        #expect(ready.status == 503)
        #expect(try ready.json()["status"] as? String == "schema_outdated")
        #expect(try HTTPTestClient.get(port: relay.port, path: "/healthz").status == 200)
        #expect(try Subprocess.cli(["migrate"], databaseURL: database.url).status == 0)
        try relay.waitUntilReady()
    }

    @Test func readinessFollowsTheDatabaseDownAndUpAgain() throws {
        let cluster = try PrivateCluster()
        #expect(try Subprocess.cli(["migrate"], databaseURL: cluster.url).status == 0)
        let relay = try RelayDaemon(databaseURL: cluster.url)
        try relay.waitUntilReady()

        try cluster.stop()
        var status = 0
        for _ in 0..<100 {
            status = try HTTPTestClient.get(port: relay.port, path: "/readyz").status
            if status == 503 { break }
            usleep(100_000)
        }
        #expect(status == 503)
        let body = try HTTPTestClient.get(port: relay.port, path: "/readyz")
        #expect(try body.json()["status"] as? String == "unavailable")
        #expect(try HTTPTestClient.get(port: relay.port, path: "/healthz").status == 200)

        try cluster.start()
        try relay.waitUntilReady(timeout: 20)
        #expect(relay.stop(signal: SIGINT) == 0)
    }

    @Test func unreachableDatabaseFromTheStart() throws {
        let relay = try RelayDaemon(databaseURL: "host=/nonexistent-wimz port=5432 user=x dbname=x")
        relay.waitForLog(containing: "\"state\":\"unavailable\"")
        let ready = try HTTPTestClient.get(port: relay.port, path: "/readyz")
        #expect(ready.status == 503)
        #expect(try ready.json()["status"] as? String == "unavailable")
        #expect(relay.stop() == 0)
    }

    @Test func invalidConfigurationIsRejectedBeforeListening() throws {
        let result = try Subprocess.cli(["serve", "--listen", "nonsense"], databaseURL: "host=/tmp dbname=x")
        #expect(result.status != 0)
        #expect(result.stderr.contains("invalid listen address"))
        let level = try Subprocess.cli(["serve"], databaseURL: "host=/tmp dbname=x", environment: ["WIMZ_LOG_LEVEL": "loud"])
        #expect(level.status != 0 && level.stderr.contains("invalid log level"))
    }
}
