import ArgumentParser
import Foundation
import RelayCore
import RelayStore

/// A failure the operator can act on: printed as one line on stderr, exit status 1.
struct CLIError: Error, CustomStringConvertible {
    var description: String
    init(_ description: String) { self.description = description }
}

/// Reads `WIMZ_*` variables (flags win over the environment).
enum Environment {
    static func value(_ name: String) -> String? {
        guard let v = ProcessInfo.processInfo.environment[name], !v.isEmpty else { return nil }
        return v
    }
}

/// Serve's settings `names`, from the environment, for commands that act for the relay (the
/// realm secrets are managed in, the pairing codes' lifetime).
func relaySettings(_ names: [String]) throws -> RelayConfiguration {
    do {
        return try ServeOptions.configuration(reading: names, environment: ProcessInfo.processInfo.environment)
    } catch {
        throw CLIError(error.description)
    }
}

/// Options shared by every command that talks to the database (serve's rows of the same names).
struct DatabaseOptions: ParsableArguments {
    @Option(name: .customLong("database-url"), help: DatabaseOptions.help("WIMZ_DATABASE_URL"))
    var databaseURL: String?

    @Option(name: .customLong("migrations-dir"), help: DatabaseOptions.help("WIMZ_MIGRATIONS_DIR"))
    var migrationsDir: String?

    /// The help of serve's option `env`.
    static func help(_ env: String) -> ArgumentHelp {
        let option = ServeOptions.option(env)
        return ArgumentHelp("\(option?.help ?? "") (env \(env)\(option?.defaultText.map { ", default \($0)" } ?? "")).")
    }

    func resolvedURL() throws -> String {
        guard let url = databaseURL ?? Environment.value("WIMZ_DATABASE_URL") else {
            throw CLIError("no database configured: pass --database-url or set WIMZ_DATABASE_URL")
        }
        return url
    }

    func connect() throws -> PGConnection {
        do {
            return try PGConnection(conninfo: try resolvedURL())
        } catch let error as StoreError {
            throw CLIError(error.description)
        }
    }

    func migrator() throws -> Migrator {
        let dir = try MigrationsLocator.find(explicit: migrationsDir ?? Environment.value("WIMZ_MIGRATIONS_DIR"))
        return Migrator(migrations: try Migration.load(from: dir))
    }
}

/// Finds `migrations/`: the explicit path, else `<prefix>/share/wimz-relay/migrations` beside an
/// installed binary, else the source tree this binary was built from, else the package's
/// `/usr/share/wimz-relay/migrations` (where /proc, through which the binary finds itself, is missing).
enum MigrationsLocator {
    static func find(explicit: String?) throws -> String {
        if let explicit { return explicit }
        let exe = URL(fileURLWithPath: "/proc/self/exe").resolvingSymlinksInPath().deletingLastPathComponent()
        let source = URL(fileURLWithPath: #filePath).deletingLastPathComponent()
            .deletingLastPathComponent().deletingLastPathComponent().appendingPathComponent("migrations")
        let candidates = [
            exe.deletingLastPathComponent().appendingPathComponent("share/wimz-relay/migrations"),
            exe.appendingPathComponent("migrations"),
            source,
            URL(fileURLWithPath: "/usr/share/wimz-relay/migrations"),
        ]
        for candidate in candidates where FileManager.default.fileExists(atPath: candidate.appendingPathComponent("0001_initial.sql").path) {
            return candidate.path
        }
        throw CLIError("migrations directory not found; pass --migrations-dir or set WIMZ_MIGRATIONS_DIR")
    }
}

/// Turns store errors into one-line CLI errors.
@discardableResult
func storeCall<T>(_ body: () throws -> T) throws -> T {
    do {
        return try body()
    } catch let error as StoreError {
        throw CLIError(error.description)
    }
}

func parseDeviceID(_ text: String) throws -> DeviceID {
    guard let id = DeviceID(text) else {
        throw CLIError("invalid device id '\(text.prefix(80))': use 1-64 characters from A-Z a-z 0-9 _ . -")
    }
    return id
}

/// Left-aligned text table for list commands.
func printTable(_ header: [String], _ rows: [[String]]) {
    let all = [header] + rows
    let widths = header.indices.map { i in all.map { $0[i].count }.max() ?? 0 }
    for row in all {
        let line = row.enumerated().map { i, cell in
            i == row.count - 1 ? cell : cell + String(repeating: " ", count: widths[i] - cell.count)
        }.joined(separator: "  ")
        print(line)
    }
}
