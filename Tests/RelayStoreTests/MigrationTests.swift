import Foundation
import Testing
import RelayTestSupport
@testable import RelayStore

@Suite struct MigrationTests {
    @Test func freshDatabaseMigratesThenRerunIsANoOp() throws {
        let database = try TestDatabase(migrated: false)
        defer { database.drop() }
        let db = try database.connect()
        let migrator = try TestEnvironment.migrator()
        #expect(try migrator.status(db).pending == migrator.migrations.map(\.version))
        let applied = try migrator.migrate(db)
        #expect(applied.map(\.version) == migrator.migrations.map(\.version))
        #expect(try migrator.migrate(db).isEmpty)
        let status = try migrator.status(db)
        #expect(status.isCurrent && status.unknown.isEmpty)
        for table in ["devices", "tokens", "audit_log", "turn_secret", "turn_issuances", "schema_migrations"] {
            #expect(try db.execute("SELECT to_regclass(\(table)) IS NOT NULL").first?[0] == "t", "table \(table)")
        }
    }

    @Test func concurrentRunnersApplyEachMigrationOnce() throws {
        let database = try TestDatabase(migrated: false)
        defer { database.drop() }
        let migrator = try TestEnvironment.migrator()
        let results = ResultsBox()
        DispatchQueue.concurrentPerform(iterations: 4) { _ in
            do {
                let applied = try migrator.migrate(try database.connect())
                results.append(.success(applied.count))
            } catch {
                results.append(.failure(error))
            }
        }
        let counts = try results.values.map { try $0.get() }
        #expect(counts.sorted() == [0, 0, 0, migrator.migrations.count])
        let rows = try database.connect().execute("SELECT count(*) FROM schema_migrations")
        #expect(rows.first?[0] == String(migrator.migrations.count))
    }

    @Test func changedAppliedFileIsAnError() throws {
        let database = try TestDatabase(migrated: true)
        defer { database.drop() }
        var edited = try TestEnvironment.migrator().migrations
        edited[0].sql += "\n-- edited after release\n"
        let error = #expect(throws: StoreError.self) { try Migrator(migrations: edited).migrate(try database.connect()) }
        #expect(error?.description.contains("was changed after it was applied") == true)
    }

    @Test func laterMigrationAppliesOnTopAndDatabaseNewerThanBinaryIsReported() throws {
        let database = try TestDatabase(migrated: true)
        defer { database.drop() }
        let db = try database.connect()
        var migrations = try TestEnvironment.migrator().migrations
        migrations.append(Migration(version: 9999, name: "test_extra", sql: "CREATE TABLE test_extra (x int);"))
        #expect(try Migrator(migrations: migrations).migrate(db).map(\.version) == [9999])
        let older = try TestEnvironment.migrator().status(db)
        #expect(older.isCurrent)
        #expect(older.unknown == [9999])
    }

    @Test func failingMigrationRollsBackCompletely() throws {
        let database = try TestDatabase(migrated: true)
        defer { database.drop() }
        let db = try database.connect()
        var migrations = try TestEnvironment.migrator().migrations
        migrations.append(Migration(version: 9998, name: "broken", sql: "CREATE TABLE half_done (x int); SELECT 1/0;"))
        #expect(throws: StoreError.self) { try Migrator(migrations: migrations).migrate(db) }
        #expect(try db.execute("SELECT to_regclass('half_done') IS NULL").first?[0] == "t")
        #expect(try Migrator(migrations: migrations).status(db).pending == [9998])
    }

    @Test func loadsFilesInVersionOrder() throws {
        let migrations = try TestEnvironment.migrator().migrations
        #expect(!migrations.isEmpty)
        #expect(migrations.map(\.version) == migrations.map(\.version).sorted())
        #expect(migrations.first?.name == "initial")
    }
}

final class ResultsBox: @unchecked Sendable {
    private let lock = NSLock()
    private var storage: [Result<Int, Error>] = []
    func append(_ r: Result<Int, Error>) { lock.lock(); storage.append(r); lock.unlock() }
    var values: [Result<Int, Error>] { lock.lock(); defer { lock.unlock() }; return storage }
}
