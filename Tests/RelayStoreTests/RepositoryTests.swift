import Foundation
import Testing
import RelayCore
import RelayCrypto
import RelayTestSupport
@testable import RelayStore

@Suite struct DeviceRepositoryTests {
    @Test func addListDisableEnableAreAudited() throws {
        let database = try TestDatabase()
        defer { database.drop() }
        let db = try database.connect()
        let devices = DeviceRepository(db)
        let id = DeviceID("robot-7")!
        try devices.add(id, name: "Rex", actor: "test")
        #expect(try devices.list().map(\.id) == [id])
        #expect(try devices.get(id)?.name == "Rex")

        let duplicate = #expect(throws: StoreError.self) { try devices.add(id, name: "again", actor: "test") }
        #expect(duplicate?.description == "device robot-7 already exists")

        #expect(try devices.setDisabled(id, true, actor: "test").changed)
        #expect(try devices.get(id)?.isDisabled == true)
        #expect(try devices.setDisabled(id, true, actor: "test").changed == false)
        #expect(try devices.setDisabled(id, false, actor: "test").changed)
        #expect(try devices.get(id)?.isDisabled == false)

        let unknown = #expect(throws: StoreError.self) { try devices.setDisabled(DeviceID("nope")!, true, actor: "t") }
        #expect(unknown?.description == "unknown device nope")

        let kinds = try AuditRepository(db).query(deviceID: "robot-7").map(\.event.kind)
        #expect(kinds == [.deviceCreated, .deviceDisabled, .deviceEnabled])
    }

    @Test func databaseRejectsInvalidIdsEvenWithoutTheCLI() throws {
        let database = try TestDatabase()
        defer { database.drop() }
        #expect(throws: StoreError.self) { try database.connect().execute("INSERT INTO devices (id) VALUES ('bad id')") }
    }
}

@Suite struct TokenRepositoryTests {
    func setUp() throws -> (TestDatabase, PGConnection) {
        let database = try TestDatabase()
        let db = try database.connect()
        try DeviceRepository(db).add(DeviceID("dev1")!, name: "", actor: "test")
        return (database, db)
    }

    @Test func issuedTokenVerifiesAndOnlyItsDigestIsStored() throws {
        let (database, db) = try setUp()
        defer { database.drop() }
        let tokens = TokenRepository(db)
        let issued = try tokens.issue(device: DeviceID("dev1")!, role: .robot, label: "rex", expiresIn: nil, actor: "test")
        #expect(issued.secret.hasPrefix("wimz_r_"))
        guard case .success(let entry) = try tokens.verify(secret: issued.secret) else {
            Issue.record("token did not verify")
            return
        }
        #expect(entry.token.id == issued.record.id && entry.token.role == .robot)
        #expect(try tokens.verify(secret: issued.secret + "x") == .failure(.unknownToken))

        // Nothing in the row contains the secret; the digest is its SHA-256.
        let row = try db.execute("SELECT row_to_json(t)::text, encode(digest, 'hex') FROM tokens t").first!
        #expect(!(row[0] ?? "").contains(String(issued.secret.dropFirst(7))))
        #expect(row[1] == Hex.encode(Crypto.sha256(issued.secret)))
        #expect(try tokens.list().map(\.id) == [issued.record.id])
    }

    @Test func expiryRevocationAndDeviceDisableStopAToken() throws {
        let (database, db) = try setUp()
        defer { database.drop() }
        let tokens = TokenRepository(db)
        let device = DeviceID("dev1")!
        let shortLived = try tokens.issue(device: device, role: .app, label: "", expiresIn: 60, actor: "test")
        #expect(shortLived.record.expiresAt != nil)
        #expect(try tokens.verify(secret: shortLived.secret, at: .now().adding(seconds: 61)) == .failure(.expiredToken))
        #expect(try tokens.verify(secret: shortLived.secret, at: .now()).isSuccess)

        let revoked = try tokens.issue(device: device, role: .app, label: "", expiresIn: nil, actor: "test")
        #expect(try tokens.revoke(id: revoked.record.id, actor: "test").changed)
        #expect(try tokens.revoke(id: revoked.record.id, actor: "test").changed == false)
        #expect(try tokens.verify(secret: revoked.secret) == .failure(.revokedToken))

        let normal = try tokens.issue(device: device, role: .app, label: "", expiresIn: nil, actor: "test")
        try DeviceRepository(db).setDisabled(device, true, actor: "test")
        #expect(try tokens.verify(secret: normal.secret) == .failure(.deviceDisabled))
        #expect(throws: StoreError.self) { try tokens.issue(device: device, role: .app, label: "", expiresIn: nil, actor: "t") }

        // What the relay reads: presented tokens by digest (an unknown one finds nothing), held ones by id.
        let byDigest = try tokens.credentials(digests: [normal.record.digest, revoked.record.digest, Array(repeating: 7, count: 32)])
        #expect(Set(byDigest.map(\.token.id)) == [normal.record.id, revoked.record.id])
        #expect(byDigest.first { $0.token.id == normal.record.id }?.deviceDisabled == true)
        #expect(try tokens.credentials(ids: [shortLived.record.id, 999_999]).map(\.token.id) == [shortLived.record.id])

        let kinds = try AuditRepository(db).query(deviceID: "dev1", kind: .tokenRevoked).map(\.event.tokenID)
        #expect(kinds == [revoked.record.id])
    }

    @Test func issuingForUnknownDeviceOrWithBadExpiryFails() throws {
        let (database, db) = try setUp()
        defer { database.drop() }
        let tokens = TokenRepository(db)
        let unknown = #expect(throws: StoreError.self) {
            try tokens.issue(device: DeviceID("ghost")!, role: .robot, label: "", expiresIn: nil, actor: "t")
        }
        #expect(unknown?.description == "unknown device ghost")
        #expect(throws: StoreError.self) {
            try tokens.issue(device: DeviceID("dev1")!, role: .robot, label: "", expiresIn: 0, actor: "t")
        }
        #expect(throws: StoreError.self) { try tokens.revoke(id: 424242, actor: "t") }
    }

    @Test func lastUsedIsRecorded() throws {
        let (database, db) = try setUp()
        defer { database.drop() }
        let tokens = TokenRepository(db)
        let issued = try tokens.issue(device: DeviceID("dev1")!, role: .app, label: "", expiresIn: nil, actor: "t")
        let when = UnixTime(seconds: UnixTime.now().seconds)
        let rowVersion = { try db.execute("SELECT xmin::text FROM tokens WHERE id = \(issued.record.id)").first?[0] }
        let issuedVersion = try rowVersion()
        // An id that is not a token's (never the case from the relay) is passed over, not an error.
        try tokens.touch([issued.record.id: when, 999_999: when])
        #expect(try tokens.list().first?.lastUsedAt == when)
        // Its own table: the token's row, read by lookups from the index alone, is not written.
        #expect(try rowVersion() == issuedVersion)
        // To the minute: a use 30 s later leaves the row alone, one a minute later moves it.
        try tokens.touch([issued.record.id: UnixTime(seconds: when.seconds + 30)])
        #expect(try tokens.list().first?.lastUsedAt == when)
        try tokens.touch([issued.record.id: UnixTime(seconds: when.seconds + 60)])
        #expect(try tokens.list().first?.lastUsedAt == UnixTime(seconds: when.seconds + 60))
        // A release before migration 0016 (a rolling upgrade, a roll back) writes the token's row:
        // the later of the two shows.
        try db.execute("UPDATE tokens SET last_used_at = to_timestamp(\(when.seconds + 120)) WHERE id = \(issued.record.id)")
        #expect(try tokens.list().first?.lastUsedAt == UnixTime(seconds: when.seconds + 120))
    }

    /// A cold node's lookups read the digest's index and no heap page (migration 0016): every
    /// column the lookup names is in that index. Scans that would hide the answer are switched off.
    @Test func aLookupByDigestsReadsTheIndexAlone() throws {
        let (database, db) = try setUp()
        defer { database.drop() }
        _ = try TokenRepository(db).issue(device: DeviceID("dev1")!, role: .app, label: "", expiresIn: nil, actor: "t")
        try db.execute("VACUUM tokens")
        try db.execute("SET enable_seqscan = off")
        try db.execute("SET enable_bitmapscan = off")
        let plan = try db.execute("EXPLAIN \(TokenRepository.lookup(byDigests: [[0]]))").rows.compactMap(\.first).compactMap { $0 }
        #expect(plan.first?.hasPrefix("Index Only Scan using tokens_digest_key on tokens t") == true, "\(plan)")
    }
}

@Suite struct AuditRepositoryTests {
    @Test func appendIsIdempotentAndTheLogIsAppendOnly() throws {
        let database = try TestDatabase()
        defer { database.drop() }
        let db = try database.connect()
        let audit = AuditRepository(db)
        let event = try AuditRepository.event(.authFailed, at: .now(), actor: "relay", deviceID: "d1", remoteAddress: "127.0.0.1",
                                              details: .object([("reason", "unknown_token")]))
        #expect(try audit.append([event], fresh: true) == 1)
        #expect(try audit.append([event]) == 0)
        // A "fresh" batch has no conflict check: a stored id fails it (the writer then retries
        // with the check), and the statement, prepared once, serves both kinds of batch again.
        let error = #expect(throws: StoreError.self) { try audit.append([event], fresh: true) }
        #expect(error?.isUniqueViolation == true)
        let later = try AuditRepository.event(.authFailed, at: .now(), actor: "relay", deviceID: "d1")
        #expect(try audit.append([event, later]) == 1)
        #expect(try audit.append([try AuditRepository.event(.authFailed, at: .now(), actor: "relay", deviceID: "d1")], fresh: true) == 1)
        let all = try audit.query(deviceID: "d1")
        #expect(all.count == 3)
        let stored = all.prefix(1)
        #expect(stored.first?.event.id == event.id)
        #expect(stored.first?.detailsJSON.contains("unknown_token") == true)
        #expect(throws: StoreError.self) { try db.execute("UPDATE audit_log SET actor = 'x'") }
        #expect(throws: StoreError.self) { try db.execute("DELETE FROM audit_log") }
    }

    /// Rows travel as binary arrays: quotes, backslashes, commas, braces, the word NULL and
    /// non-ASCII text must arrive as sent, absent fields as NULL, times to the microsecond.
    @Test func everyFieldSurvivesTheArrayEncoding() throws {
        let database = try TestDatabase()
        defer { database.drop() }
        let audit = AuditRepository(try database.connect())
        let awkward = #"a "quoted" \ back\slash, {brace} NULL é ✓"#
        let full = try AuditRepository.event(.authFailed, at: .now(), actor: awkward, deviceID: "NULL", tokenID: 42,
                                             remoteAddress: "::1", details: .object([("reason", .string(awkward))]))
        let bare = try AuditRepository.event(.appConnected, at: .now(), actor: "relay")
        #expect(try audit.append([full, bare]) == 2)
        let stored = try audit.query()
        #expect(stored.map(\.event.id) == [full.id, bare.id])
        let first = try #require(stored.first?.event), second = try #require(stored.last?.event)
        #expect(first.actor == awkward && first.deviceID == "NULL" && first.tokenID == 42 && first.remoteAddress == "::1")
        #expect(first.at == full.at && first.kind == .authFailed)
        #expect(stored.first?.detailsJSON == #"{"reason": "a \"quoted\" \\ back\\slash, {brace} NULL é ✓"}"#)
        #expect(second.deviceID == nil && second.tokenID == nil && second.remoteAddress == nil)
    }

    @Test func queryPagesAndFiltersByTime() throws {
        let database = try TestDatabase()
        defer { database.drop() }
        let audit = AuditRepository(try database.connect())
        var events: [AuditEvent] = []
        for i in 0..<1200 {
            var e = try AuditRepository.event(.appConnected, at: .now(), actor: "relay", deviceID: i % 2 == 0 ? "even" : "odd")
            e.at = UnixTime(seconds: 1_000_000 + Int64(i))
            events.append(e)
        }
        #expect(try audit.append(events) == 1200)  // more than one INSERT batch
        let page1 = try audit.query(deviceID: "even", limit: 100)
        #expect(page1.count == 100)
        let page2 = try audit.query(deviceID: "even", afterSequence: page1.last!.sequence, limit: 1000)
        #expect(page2.count == 500)
        let ranged = try audit.query(from: UnixTime(seconds: 1_000_010), to: UnixTime(seconds: 1_000_020))
        #expect(ranged.count == 10)
    }
}

/// The binary arrays, read back by the server as text: what it stored is what was meant.
@Suite struct PGBinaryArrayTests {
    @Test func everyElementTypeReadsBackAsSent() throws {
        let database = try TestDatabase()
        defer { database.drop() }
        let db = try database.connect()
        func readBack<Element: PGArrayElement>(_ type: PGQuery, _ values: [Element?]) throws -> String? {
            try db.executePrepared("SELECT \(values)::\(type)[]::text").first?[0]
        }
        #expect(try readBack("text", ["a", nil, #"q"u\o,{}"#, "é ✓", ""]) == #"{a,NULL,"q\"u\\o,{}","é ✓",""}"#)
        #expect(try readBack("bigint", [0, nil, -5, .max] as [Int64?]) == "{0,NULL,-5,9223372036854775807}")
        #expect(try readBack("int", [7, -1, nil] as [Int32?]) == "{7,-1,NULL}")
        #expect(try readBack("timestamptz", [UnixTime(microseconds: 1_764_118_800_123_456), UnixTime(microseconds: 0), nil])
                == #"{"2025-11-26 01:00:00.123456+00","1970-01-01 00:00:00+00",NULL}"#)
        let id = "0192a0b4-5c6d-7e8f-9a0b-1c2d3e4f5a6b", other = "ffeeddcc-bbaa-4988-8766-554433221100"
        #expect(try readBack("uuid", [try #require(UUIDValue(id)), try #require(UUIDValue(other.uppercased()))])
                == "{\(id),\(other)}")
        #expect(try readBack("jsonb", [.object([("b", 1), ("a", "x é")]), nil, .raw(#"{"c":[true]}"#)] as [JSONValue?])
                == #"{"{\"a\": \"x é\", \"b\": 1}",NULL,"{\"c\": [true]}"}"#)
        #expect(try readBack("text", [] as [String?]) == "{}")
        #expect(try readBack("bytea", [[0, 0xFF], nil] as [[UInt8]?]) == #"{"\\x00ff",NULL}"#)
    }

    /// A UUID goes as its 16 bytes in order.
    @Test func aUUIDIsItsSixteenBytes() throws {
        let id = try #require(UUIDValue("00112233-4455-6677-8899-aabbccddeeff"))
        #expect(PGBinaryArray.uuids([id]).suffix(20) == [0, 0, 0, 16, 0x00, 0x11, 0x22, 0x33, 0x44, 0x55, 0x66, 0x77,
                                                         0x88, 0x99, 0xAA, 0xBB, 0xCC, 0xDD, 0xEE, 0xFF])
    }
}

extension Result {
    var isSuccess: Bool { if case .success = self { return true } else { return false } }
}
