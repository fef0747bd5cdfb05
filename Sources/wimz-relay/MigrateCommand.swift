import ArgumentParser
import RelayCore
import RelayStore

struct Migrate: ParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Apply pending database migrations (idempotent; safe to run concurrently, e.g. as ExecStartPre).")

    @OptionGroup var database: DatabaseOptions

    func run() throws {
        let migrator = try database.migrator()
        let db = try database.connect()
        // A release older than the schema's floor touches nothing (docs/operations.md "Roll back").
        if let refusal = try storeCall({ try migrator.releaseFloor(db) })?.refusal(for: .current) {
            throw CLIError(refusal)
        }
        let applied = try storeCall { try migrator.migrate(db) }
        for migration in applied { print("applied \(String(format: "%04d", migration.version))_\(migration.name)") }
        let status = try storeCall { try migrator.status(db) }
        print("schema is current (\(status.applied.count) migrations applied)")
        if !status.unknown.isEmpty {
            print("note: the database has migrations this binary does not know: \(status.unknown)")
        }
    }
}
