import Foundation
import Testing
import RelayCore
import RelayStore
import RelayTestSupport

/// The timeline's store against PostgreSQL: a batch an earlier attempt may have stored (its
/// commit's answer lost in a failover, a spool written at a stop) is stored once.
@Suite struct TimelineStoreTests {
    @Test func aBatchThatMayBeStoredAlreadyLeavesOutWhatIsThere() throws {
        let database = try TestDatabase()
        defer { database.drop() }
        let db = try database.connect()
        let device = DeviceID("dev1")!
        try DeviceRepository(db).add(device, name: "", actor: "test")
        let now = UnixTime.now()
        let entries = (0..<4).map { k in
            TimelineRepository.NewEntry(device: device, at: now.adding(seconds: Int64(k)), source: .robot, event: "bark_detected",
                                        message: #"{"type":"event","event":"bark_detected","data":{"k":\#(k)}}"#)
        }
        let repository = TimelineRepository(db)
        try repository.append(Array(entries.prefix(2)))
        // Written again with the two that were not: only those two are stored, after the first two.
        #expect(try repository.append(entries, mayBeStored: true).map(\.newest) == [4])
        func stored() throws -> [String] {
            try db.execute("SELECT message FROM timeline_entries ORDER BY number").records.map { try $0.string("message") }
        }
        #expect(try stored() == entries.map(\.message))
        // All of them again: nothing new. The same text at another moment is another entry.
        #expect(try repository.append(entries, mayBeStored: true).isEmpty)
        var later = entries[0]
        later.at = now.adding(seconds: 60)
        try repository.append([later], mayBeStored: true)
        #expect(try stored() == entries.map(\.message) + [entries[0].message])
    }
}
