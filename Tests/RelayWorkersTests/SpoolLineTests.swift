import RelayCore
import Testing
@testable import RelayWorkers

/// The audit spool's lines: what this build writes reads back as it was, and what 1.1 wrote
/// (nulls spelled out, the same keys) reads as the same records.
@Suite struct SpoolLineTests {
    private let event = AuditEvent(
        id: UUIDValue("0190b6a2-7c1e-7d3a-9f00-0123456789ab")!, at: UnixTime(microseconds: 1_795_000_000_123_456),
        kind: .appDisconnected, actor: "relay", deviceID: "robot-42", tokenID: 7, remoteAddress: "2001:db8::1",
        details: .object([("bytes_in", .int(512)), ("close_reason", .string("going \"away\"/now")), ("connection", .int(3)),
                          ("duration_s", .double(12.5)), ("servers", .array([.string("turn-a"), .null, .bool(true)]))]))
    private let issuance = TurnIssuance(
        id: "0190b6a2-7c1e-7d3a-9f00-0123456789ab", deviceID: DeviceID("robot-42")!, tokenID: nil, role: .robot,
        userID: "robot-42", username: "1795000600:robot-42", secretID: 3, issuedAt: UnixTime(microseconds: 1_795_000_000_000_000),
        expiresAt: UnixTime(microseconds: 1_795_000_600_000_000), clientAddress: nil, via: "push")

    @Test func eventsAndIssuancesReadBackAsWritten() throws {
        for record in [SpoolLine.event(event), .issuance(issuance)] {
            let line = try record.line()
            #expect(!line.contains("\n"))
            #expect(SpoolLine(line: line) == record)
        }
        let text = SpoolLine.text([event], [issuance]) { record, _ in Issue.record("unwritable: \(record)") }
        #expect(text.split(separator: "\n").map { SpoolLine(line: $0) } == [.issuance(issuance), .event(event)])
    }

    @Test func linesThatTheLastReleaseWroteAreRead() {
        let eventLine = #"{"id":"0190b6a2-7c1e-7d3a-9f00-0123456789ab","at_us":1795000000123456,"kind":"app_disconnected","#
            + #""actor":"relay","device_id":"robot-42","token_id":7,"remote_addr":"2001:db8::1","details":{"bytes_in":512,"#
            + #""close_reason":"going \"away\"/now","connection":3,"duration_s":12.5,"servers":["turn-a",null,true]}}"#
        #expect(SpoolLine(line: eventLine) == .event(event))
        let issuanceLine = #"{"issuance":{"id":"0190b6a2-7c1e-7d3a-9f00-0123456789ab","device_id":"robot-42","token_id":null,"#
            + #""role":"robot","user_id":"robot-42","username":"1795000600:robot-42","secret_id":3,"#
            + #""issued_at_us":1795000000000000,"expires_at_us":1795000600000000,"client_addr":null,"via":"push"}}"#
        #expect(SpoolLine(line: issuanceLine) == .issuance(issuance))
        // An event without a device or address, and with no details.
        let bare = #"{"id":"0190b6a2-7c1e-7d3a-9f00-0123456789ab","at_us":1,"kind":"turn_secret_added","actor":"cli","#
            + #""device_id":null,"token_id":null,"remote_addr":null,"details":{}}"#
        #expect(SpoolLine(line: bare) == .event(AuditEvent(id: event.id, at: UnixTime(microseconds: 1), kind: .turnSecretAdded,
                                                            actor: "cli")))
    }

    @Test func whatIsNoRecordIsNotRead() {
        for line in [#"[]"#, #"{"issuance":{"device_id":"no spaces allowed"}}"#, #"{"id":"x","at_us":1}"#,
                     #"{"id":"0190b6a2-7c1e-7d3a-9f00-0123456789ab","at_us":1,"kind":"no_such_kind","actor":"cli","details":{}}"#,
                     #"{"id":"0190b6a2-7c1e-7d3a-9f00-0123456789ab","at_us":1.5,"kind":"turn_secret_added","actor":"cli","details":{}}"#] {
            #expect(SpoolLine(line: line) == nil, "\(line)")
        }
    }

    @Test func verbatimDetailsAreWrittenAsTheJSONTheyAre() throws {
        var withRaw = event
        withRaw.details = .raw(#"{"reason":"a\u0000b","n":[1,2]}"#)
        guard case .event(let back)? = SpoolLine(line: try SpoolLine.event(withRaw).line()) else {
            Issue.record("not read back")
            return
        }
        #expect(back.details == .object([("n", .array([.int(1), .int(2)])), ("reason", .string("a\u{0}b"))]))
    }
}
