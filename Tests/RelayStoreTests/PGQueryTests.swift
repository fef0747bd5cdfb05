import Testing
import RelayCore
import RelayTestSupport
@testable import RelayStore

/// Statements written with their values in place: each value a numbered parameter in its one
/// encoding, parts composed with their values renumbered, and the values reaching the server as
/// what they are.
@Suite struct PGQueryTests {
    private func texts(_ query: PGQuery) -> [String?] {
        query.parameters.map { parameter in
            switch parameter.value {
            case .text(let text): text
            case .binary: "<binary>"
            case .null: nil
            }
        }
    }

    @Test func valuesBecomeNumberedParametersInTheirOneEncoding() {
        let device = DeviceID("d1")!, until: UnixTime? = nil, id: Int64 = 42
        let query: PGQuery = "UPDATE t SET a = \(true), b = \(false), u = \(until) WHERE id = \(id) AND d = \(device) AND r = \(Role.app)"
        #expect(query.sql == "UPDATE t SET a = $1, b = $2, u = $3 WHERE id = $4 AND d = $5 AND r = $6")
        #expect(texts(query) == ["t", "f", nil, "42", "d1", "app"])
        let bytes: PGQuery = "SELECT \([UInt8]([0x00, 0xAB]))::bytea, \(UnixTime(microseconds: 1_500_000))::timestamptz, \(["a"])::text[]"
        #expect(texts(bytes) == [#"\x00ab"#, "1970-01-01T00:00:01.500000Z", "<binary>"])
    }

    @Test func aPartIsSQLWithItsValuesNumberedAfterThoseBeforeIt() {
        let node = "n1"
        let condition: PGQuery = "node_id = \(node) AND incarnation = \("i1")::uuid"
        let query: PGQuery = "SELECT \(7) FROM relay_nodes WHERE \(condition) AND x = \(8) AND \(condition)"
        #expect(query.sql == "SELECT $1 FROM relay_nodes WHERE node_id = $2 AND incarnation = $3::uuid AND x = $4 "
            + "AND node_id = $5 AND incarnation = $6::uuid")
        #expect(texts(query) == ["7", "n1", "i1", "8", "n1", "i1"])
    }

    @Test func aNameIsQuotedSoThatItCanOnlyName() {
        let query: PGQuery = "LISTEN \(identifier: #"wimz"; DROP TABLE x; --"#)"
        #expect(query.sql == #"LISTEN "wimz""; DROP TABLE x; --""#)
        #expect(query.parameters.isEmpty)
    }

    /// What a value means survives the trip: text with quotes and a NUL-free Unicode, a time, a
    /// NULL, a boolean, bytes — read back by the server.
    @Test func theServerReadsEachValueAsWhatItIs() throws {
        let database = try TestDatabase(migrated: false)
        defer { database.drop() }
        let db = try database.connect()
        let text = #"it's "quoted" \ é ✓; --"#, at = UnixTime(microseconds: 1_764_118_800_123_456), absent: String? = nil
        let row = try db.execute("""
            SELECT \(text)::text AS t, \(at)::timestamptz AS at, \(absent)::text IS NULL AS absent, \(true)::boolean AS yes,
                   encode(\([UInt8]([0, 1, 0xFF]))::bytea, 'hex') AS hex, \(Int64.min)::bigint AS low,
                   array_length(\([DeviceID("a")!, DeviceID("b")!])::text[], 1) AS devices
            """).single()
        #expect(try row.string("t") == text && row.time("at") == at && row.bool("absent") && row.bool("yes"))
        #expect(try row.string("hex") == "0001ff" && row.int64("low") == .min && row.int("devices") == 2)
    }
}
