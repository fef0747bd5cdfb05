import Foundation
import Testing
import RelayTestSupport

/// The relay prunes what is past its retention by itself and shows every table's size in
/// `/metrics` (docs/operations.md "Retention").
@Suite struct RetentionTests {
    /// Five audit rows from 31–35 days ago, and how many there are.
    func addOldAuditRows(_ f: RelayFixture) throws {
        _ = try f.database.connect().execute(
            """
            INSERT INTO audit_log (event_id, at, event, actor)
            SELECT gen_random_uuid(), now() - make_interval(days => d), 'old_event', 'test' FROM generate_series(31, 35) d
            """)
    }

    func oldAuditRows(_ f: RelayFixture) throws -> Int {
        Int(try f.database.connect().execute("SELECT count(*) FROM audit_log WHERE event = 'old_event'").first?[0] ?? "") ?? -1
    }

    /// The value of the sample `name` (with its labels) in `/metrics`, if there is one.
    func sample(_ f: RelayFixture, _ name: String) throws -> Double? {
        let metrics = try HTTPTestClient.get(port: f.port, path: "/metrics").text
        return metrics.split(separator: "\n").first { $0.hasPrefix(name + " ") }.flatMap { Double($0.split(separator: " ")[1]) }
    }

    func waitFor(_ condition: () throws -> Bool) throws -> Bool {
        for _ in 0..<100 {
            if try condition() { return true }
            usleep(100_000)
        }
        return false
    }

    @Test func oldRowsArePrunedAndRecentOnesKept() throws {
        let f = try RelayFixture(environment: ["WIMZ_AUDIT_RETENTION_DAYS": "30", "WIMZ_RETENTION_INTERVAL": "1"])
        let recent = try f.auditEvents().count
        #expect(recent > 0)
        try addOldAuditRows(f)
        #expect(try oldAuditRows(f) == 5)
        #expect(try waitFor { try oldAuditRows(f) == 0 })
        #expect(try f.auditEvents().count >= recent)
        #expect(try waitFor { try sample(f, #"wimz_retention_deleted_rows_total{table="audit_log"}"#) == 5 })
        #expect(try sample(f, #"wimz_table_bytes{table="audit_log"}"#) ?? 0 > 0)
        #expect(try sample(f, #"wimz_table_bytes{table="tokens"}"#) ?? 0 > 0)
        #expect(try sample(f, #"wimz_table_rows{table="devices"}"#) != nil)
        #expect(try sample(f, "wimz_retention_errors_total") == 0)
        #expect(f.relay.waitForLogLines(count: 1) { $0.contains("\"event\":\"retention_pruned\"") && $0.contains("\"audit_log\":5") }.count == 1)
    }

    /// 0 keeps a table's rows for ever, while the other tables are still pruned.
    @Test func zeroKeepsForEver() throws {
        let f = try RelayFixture(environment: ["WIMZ_AUDIT_RETENTION_DAYS": "0", "WIMZ_RETENTION_INTERVAL": "1"])
        try addOldAuditRows(f)
        let rounds = try sample(f, "wimz_retention_rounds_total") ?? 0
        #expect(try waitFor { try sample(f, "wimz_retention_rounds_total") ?? 0 >= rounds + 2 })
        #expect(try oldAuditRows(f) == 5)
        #expect(try sample(f, #"wimz_retention_deleted_rows_total{table="audit_log"}"#) == 0)
    }

    @Test func theSettingsAreCheckedAtStart() throws {
        for (name, value) in [("WIMZ_AUDIT_RETENTION_DAYS", "-1"), ("WIMZ_TURN_ISSUANCE_RETENTION_DAYS", "soon"),
                              ("WIMZ_RETENTION_INTERVAL", "0")] {
            let result = try Subprocess.cli(["serve"], databaseURL: "dbname=unused", environment: [name: value])
            #expect(result.status != 0)
            #expect(result.stderr.contains(name), "\(result.stderr)")
        }
    }
}
