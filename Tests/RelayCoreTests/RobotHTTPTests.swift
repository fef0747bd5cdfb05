import Testing
@testable import RelayCore

@Suite struct JSONReaderTests {
    @Test func readsWhatTheWriterWritesAndRefusesMalformedInput() throws {
        let value = JSONValue.object([("a", .int(-12)), ("b", .double(2.5)), ("c", .string("x\"\\\n\u{1F600}é")),
                                      ("d", .array([.bool(true), .bool(false), .null])), ("e", .object([]))])
        #expect(try JSONReader.parse(value.encodedBytes) == value)
        #expect(try JSONReader.parse(Array(#" {"s":"\ud83d\ude00\u00e9\/"} "#.utf8)).member("s")?.stringValue == "😀é/")
        for bad in [#"{"a":1,}"#, #"{"a" 1}"#, "[1 2]", "01", "1.", "-", #""\ud800""#, "\"a\nb\"", "nul", "{} x", "",
                    #"{"a":"\x"}"#, String(repeating: "[", count: 40) + String(repeating: "]", count: 40)] {
            #expect(throws: JSONReader.Failure.self, "\(bad)") { try JSONReader.parse(Array(bad.utf8)) }
        }
    }
}

@Suite struct RobotHTTPWireTests {
    @Test func requestHeadersLoseHopByHopAndTheRelaysOwn() {
        let kept = RobotHTTP.forwardedRequestHeaders([
            ("authorization", "Bearer x"), ("cookie", "a"), ("host", "h"), ("connection", "keep-alive, x-private"),
            ("x-private", "p"), ("content-length", "3"), ("accept", "a/b"), ("x-forwarded-for", "1.2.3.4"), ("accept", "c/d"),
            ("expect", "100-continue"),
        ])
        #expect(kept.map(\.0) == ["accept"])
        #expect(kept.first?.1 == "a/b, c/d")
    }

    @Test func answerFramesAreReadStrictly() throws {
        let frame = Array(#"{"type":"http_response","id":"h0000000000000007","status":404,"headers":{"Content-Type":"text/plain","set-cookie":["a=1","b=2"],"transfer-encoding":"chunked","bad name":"x","x":"a\r\nb"},"body":"aGk=","more":false}"#.utf8)
        guard case .success(.response(let id, let status, let headers, let body, let more)) = RobotHTTP.parse(frame) else {
            Issue.record("not read")
            return
        }
        #expect(id == 7 && status == 404 && body == "aGk=" && !more)
        #expect(headers == [.init("content-type", "text/plain"), .init("set-cookie", "a=1"), .init("set-cookie", "b=2")])
        #expect(RobotHTTP.parse(Array(#"{"type":"http_body","id":"h0000000000000007","body":null,"more":true}"#.utf8))
                == .success(.body(id: 7, body: nil, more: true)))
        for bad in [#"{"type":"http_response","id":"h0000000000000007","status":99}"#, #"{"type":"http_response","id":"h0000000000000007","status":200,"more":"yes"}"#,
                    #"{"type":"http_response","id":"h0000000000000007","status":200,"body":5}"#, #"{"type":"http_other","id":"h0000000000000007"}"#] {
            guard case .failure(let error) = RobotHTTP.parse(Array(bad.utf8)) else { Issue.record("accepted \(bad)"); continue }
            #expect(error.id == 7)
        }
        guard case .failure(let error) = RobotHTTP.parse(Array(#"{"type":"http_response","id":"c7"}"#.utf8)) else { return }
        #expect(error.id == nil)
    }

    @Test func scannerTellsAnswersFromEverythingElse() {
        #expect(Envelope.scan(Array(#"{"type":"http_response","id":"h1","status":200}"#.utf8)).kind == .httpResponse)
        #expect(Envelope.scan(Array(#"{"id":"h1","type":"http_body"}"#.utf8)).kind == .httpBody)
    }
}

@Suite struct RobotHTTPExchangeTests {
    let device = DeviceID("d1")!

    @Test func answersAssembleAndGoToTheirClient() {
        let table = RobotHTTPExchanges<Int>()
        let id = table.begin(client: 1, device: device, robot: 10, now: 0)!
        #expect(table.receive(.response(id: id, status: 200, headers: [], body: nil, more: true), body: [1], from: 10) == .pending)
        // Another robot session's frame for the same id is not this exchange's.
        #expect(table.receive(.body(id: id, body: nil, more: false), body: [9], from: 11) == .unknown)
        #expect(table.receive(.body(id: id, body: nil, more: false), body: [2], from: 10)
                == .answered(1, .init(status: 200, headers: [], body: [1, 2]), startedAt: 0))
        #expect(table.count == 0)
        #expect(table.receive(.body(id: id, body: nil, more: false), body: [], from: 10) == .unknown)
    }

    @Test func limitsTimeoutsAndDepartures() {
        var limits = RobotHTTPExchanges<Int>.Limits()
        limits.timeout = 100
        limits.maxResponseBody = 3
        limits.maxPerDevice = 2
        let table = RobotHTTPExchanges<Int>(limits: limits)
        let a = table.begin(client: 1, device: device, robot: 10, now: 0)!
        let b = table.begin(client: 2, device: device, robot: 10, now: 50)!
        #expect(table.begin(client: 3, device: device, robot: 10, now: 50) == nil)
        #expect(table.receive(.response(id: a, status: 200, headers: [], body: nil, more: false), body: [1, 2, 3, 4], from: 10)
                == .failed(1, .responseTooLarge, startedAt: 0))
        #expect(table.expire(now: 149) == [])
        #expect(table.expire(now: 150) == [.failed(2, .robotTimeout, startedAt: 50)])
        let c = table.begin(client: 4, device: device, robot: 10, now: 200)!
        _ = table.begin(client: 5, device: device, robot: 11, now: 200)
        #expect(table.robotGone(10) == [.failed(4, .robotDisconnected, startedAt: 200)])
        #expect(table.malformed(id: c, from: 10) == .unknown)
        table.cancel(client: 5)
        #expect(table.count == 0)
        #expect(b != a)
    }

    @Test func exchangeIDsAreRandomAndWrittenWithSixteenHexDigits() throws {
        let table = RobotHTTPExchanges<Int>()
        let ids = (0..<20).compactMap { table.begin(client: $0, device: DeviceID("d\($0)")!, robot: 10, now: 0) }
        #expect(Set(ids).count == 20)
        #expect(zip(ids, ids.dropFirst()).allSatisfy { max($0, $1) - min($0, $1) > 1 << 20 })
        let frame = String(decoding: RobotHTTP.requestFrame(id: 0xab, method: "GET", path: "/", query: nil, headers: [],
                                                            bodyBase64: nil), as: UTF8.self)
        #expect(frame.contains(#""id":"h00000000000000ab""#))
        #expect(ExchangeID.parse("h00000000000000ab", prefix: UInt8(ascii: "h")) == 0xab)
        #expect(ExchangeID.text(UInt8(ascii: "c"), 0xfedc_ba98_7654_3210) == "cfedcba9876543210")
        for bad in ["h17", "hAB000000000000ab", "c00000000000000ab", "h00000000000000ab0", "h-0000000000000ab"] {
            #expect(ExchangeID.parse(bad, prefix: UInt8(ascii: "h")) == nil, "\(bad)")
        }
    }
}

@Suite struct RobotLegOwnershipTests {
    @Test func anAppCannotSendTheRelaysHTTPRequestsToTheRobot() {
        let hub = DeviceHub(limits: .init(), clock: .system)
        let transport = RecordingTransport()
        func session(_ id: UInt64, _ role: Role) -> Session {
            let s = Session(id: id, role: role, deviceID: DeviceID("d1")!, tokenID: Int64(id), tokenExpiresAt: nil,
                            remoteAddress: "", connectedAt: .now(), now: 0, queue: SendQueue(maxMessages: 100, maxBytes: 1 << 20))
            s.transport = transport
            hub.attach(s, now: 0, wallClock: UnixTime(seconds: 100))
            return s
        }
        let robot = session(1, .robot)
        let app = session(2, .app)
        while robot.queue.popFirst() != nil {}
        while app.queue.popFirst() != nil {}
        hub.receive(Payload(Array(#"{"type":"http_request","id":"h1","method":"GET","path":"/mode"}"#.utf8)), from: app, now: 0)
        #expect(robot.queue.isEmpty)
        #expect(app.queue.popFirst().map { String(decoding: $0.bytes, as: UTF8.self).contains("forbidden_type") } == true)
    }
}
