import Foundation
import Testing
import RelayTestSupport
@testable import RelayStore

/// What a connection does when its server changes role or goes away (a failover, docs/operations.md
/// "PostgreSQL with a standby"): it is dropped, so its thread connects again and finds the primary.
@Suite struct PGConnectionTests {
    @Test func aWriteRefusedAsReadOnlyDropsTheConnection() throws {
        let database = try TestDatabase()
        defer { database.drop() }
        let db = try PGConnection(conninfo: database.url)
        // What a demoted primary answers every write with: 25006.
        try db.execute("SET default_transaction_read_only = on")
        let error = #expect(throws: StoreError.self) { try db.execute("CREATE TABLE t (x int)") }
        #expect(error?.sqlState == PGConnection.readOnlyTransaction && error?.kind == .unavailable)
        #expect(!db.isOpen)
        // A statement refused for its own sake keeps the connection.
        let other = try PGConnection(conninfo: database.url)
        #expect(throws: StoreError.self) { try other.execute("SELECT nonsense") }
        #expect(other.isOpen)
    }

    @Test func aServerThatWentAwayIsNoticedBeforeTheNextStatement() throws {
        let database = try TestDatabase()
        defer { database.drop() }
        let db = try PGConnection(conninfo: database.url, applicationName: "wimz-relay/test-node/probe")
        let admin = try database.connect()
        #expect(try admin.execute("SELECT count(*) FROM pg_stat_activity WHERE application_name = 'wimz-relay/test-node/probe'")
            .first?[0] == "1")
        try db.verifyOpen()
        _ = try admin.execute("SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE application_name = 'wimz-relay/test-node/probe'")
        usleep(200_000)
        #expect(throws: StoreError.self) { try db.verifyOpen() }
        #expect(!db.isOpen)
    }

    /// Rows are read by column name, their types parsed once: a wrong name, a wrong type or an
    /// unexpected NULL throws and names the column.
    @Test func rowsAreReadByColumnNameAndAWrongNameOrTypeThrows() throws {
        let database = try TestDatabase()
        defer { database.drop() }
        let db = try database.connect()
        let row = try db.execute("SELECT 7::bigint AS n, 'x' AS s, NULL::text AS absent, true AS b, now() AS at").single()
        #expect(try row.int64("n") == 7 && row.string("s") == "x" && row.optionalString("absent") == nil && row.bool("b"))
        #expect(try row.time("at").microseconds > 0)
        for read in [{ _ = try row.int64("s") }, { _ = try row.string("nope") }, { _ = try row.string("absent") },
                     { _ = try row.bool("n") }, { _ = try row.time("s") }] as [() throws -> Void] {
            let error = #expect(throws: StoreError.self) { try read() }
            #expect(error?.kind == .schema)
        }
        #expect(throws: StoreError.self) { _ = try db.execute("SELECT 1 WHERE false").single() }
    }
}
