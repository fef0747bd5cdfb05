import ArgumentParser
import Foundation
import Logging
import RelayCore
import RelayCrypto
import RelayLogging
import RelayServer
import RelayStore

#if canImport(Glibc)
import Glibc
#endif

struct Serve: ParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Run the relay daemon.", discussion: ServeOptions.helpText)

    /// The settings, read by `ServeOptions` (its table is the one list of them).
    @Argument(parsing: .allUnrecognized, help: ArgumentHelp("Settings as --name value; listed below.", valueName: "setting"))
    var settings: [String] = []

    func run() throws {
        let config = try makeConfiguration()
        RelayLogging.bootstrap(level: config.logLevel)
        let log = Logger(label: "wimz.serve")
        let migrator = Migrator(migrations: try Migration.load(from: config.migrationsDirectory))
        try refuseANewerSchema(config: config, migrator: migrator)

        // Signals go to one watcher thread; block them before any other thread exists.
        let signals = SignalWatcher(signals: [SIGINT, SIGTERM, SIGHUP])
        let notifier = SystemdNotifier()
        let server: RelayServer
        do {
            server = try RelayServer(configuration: config, migrator: migrator,
                                     hooks: ServerHooks(ready: { notifier.ready() }, stopping: { notifier.stopping() },
                                                        tick: { notifier.watchdogTick(nowNanos: $0) }))
        } catch {
            throw CLIError("\(error)")
        }
        let control = server.control
        let deadline = config.stopTimeoutSeconds
        signals.start { signal in
            if signal == SIGHUP {
                log.info("signal", metadata: ["signal": "SIGHUP"])
                control.reloadTLS()
            } else {
                log.info("signal", metadata: ["signal": "\(signal == SIGTERM ? "SIGTERM" : "SIGINT")"])
                control.requestStop()
                StopDeadline.arm(seconds: deadline)
            }
        }
        server.run()
    }

    /// A release older than the schema's floor does not serve (docs/operations.md "Roll back"). A
    /// database that can't be reached now is not a refusal: the store monitor waits for it.
    func refuseANewerSchema(config: RelayConfiguration, migrator: Migrator) throws {
        guard let db = try? PGConnection(conninfo: config.databaseURL),
              let floor = try? migrator.releaseFloor(db) else { return }
        if let refusal = floor.refusal(for: .current) { throw CLIError(refusal) }
    }

    /// The table's configuration from the command line and the environment, the migrations
    /// found, the APNs key readable.
    func makeConfiguration() throws -> RelayConfiguration {
        var config: RelayConfiguration
        do {
            config = try ServeOptions.configuration(arguments: settings, environment: ProcessInfo.processInfo.environment)
        } catch {
            throw CLIError(error.description)
        }
        config.migrationsDirectory = try MigrationsLocator.find(explicit: config.migrationsDirectory.isEmpty ? nil : config.migrationsDirectory)
        if let keyFile = config.apnsKeyFile {
            guard let pem = FileContents.read(keyFile) else { throw CLIError("cannot read the APNs key file \(keyFile)") }
            do { _ = try ES256Signer(pem: pem) } catch { throw CLIError("APNs key \(keyFile): \(error)") }
        }
        return config
    }
}
