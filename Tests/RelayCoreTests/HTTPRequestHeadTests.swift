import Testing
@testable import RelayCore

/// The strict request parser against nasty inputs: every one gets a definite answer.
@Suite struct HTTPRequestHeadTests {
    func parse(_ text: String, limits: HTTPRequestHead.Limits = .init()) -> HTTPRequestHead.ParseResult {
        HTTPRequestHead.parse(Array(text.utf8), limits: limits)
    }

    func head(_ target: String, _ headers: String = "Host: relay\r\n") throws -> HTTPRequestHead {
        guard case .complete(let head, _) = parse("GET \(target) HTTP/1.1\r\n\(headers)\r\n") else {
            throw RelayError(.internalError, "not complete: \(target)")
        }
        return head
    }

    @Test func aWellFormedUpgradeParsesExactly() throws {
        let text = "GET /ws/app?device_id=robot-42&token=wimz_a_x%2By HTTP/1.1\r\nHost: relay\r\nUpgrade: websocket\r\n"
            + "Authorization:  Bearer abc \t\r\n\r\nBODY"
        guard case .complete(let head, let length) = parse(text) else { Issue.record("not complete"); return }
        #expect(length == text.utf8.count - 4)
        #expect(head.method == "GET" && head.path == "/ws/app" && head.version == "HTTP/1.1")
        #expect(try head.argument("device_id") == "robot-42")
        #expect(try head.argument("token") == "wimz_a_x+y")
        #expect(head.header("authorization") == "Bearer abc" && head.isWebSocketUpgrade)
    }

    /// Names are case-insensitive (kept lowercased); a value's bytes are Latin-1 (RFC 9110 §5.5).
    @Test func headerNamesLowercaseAndValuesAreLatin1() {
        let bytes = Array("GET / HTTP/1.1\r\nX-MiXeD-Case_1: ok\r\nX-Latin: caf".utf8) + [0xE9, 0xFF] + Array("\r\n\r\n".utf8)
        guard case .complete(let head, _) = HTTPRequestHead.parse(bytes, limits: .init()) else {
            Issue.record("not complete")
            return
        }
        #expect(head.header("x-mixed-case_1") == "ok")
        #expect(head.header("x-latin") == "caf\u{E9}\u{FF}")
    }

    /// The common names, matched in any case without a lowered copy, come out as the literal;
    /// names that differ from one in any byte but a letter's case do not.
    @Test func commonNamesMatchInAnyCaseAndOnlyThem() throws {
        let names = ["host", "origin", "accept", "upgrade", "connection", "user-agent", "content-type", "authorization",
                     "content-length", "accept-encoding", "x-forwarded-for", "sec-websocket-key", "transfer-encoding",
                     "sec-websocket-version", "sec-websocket-protocol", "sec-websocket-extensions"]
        for name in names {
            for spelling in [name, name.uppercased(), String(name.enumerated().map { $0 % 2 == 0 ? Character($1.uppercased()) : $1 })] {
                let head = try head("/", "\(spelling): 1\r\n")
                #expect(head.headers.map(\.name) == [name], "\(spelling)")
            }
            // One byte changed: a letter's neighbour, '-' for '_' or '.', a digit's place.
            var bytes = Array(name.utf8)
            bytes[bytes.count / 2] = bytes[bytes.count / 2] == UInt8(ascii: "-") ? UInt8(ascii: "_") : bytes[bytes.count / 2] ^ 0x01
            let other = String(decoding: bytes, as: UTF8.self)
            #expect(try head("/", "\(other): 1\r\n").headers.map(\.name) == [other.lowercased()])
        }
        #expect(try head("/", "x-lower: a\r\nX-Upper-9: b\r\n").headers.map(\.name) == ["x-lower", "x-upper-9"])
    }

    /// The token bytes' bit masks hold exactly RFC 9110's tchar, for all 256 bytes.
    @Test func tokenBytesAreExactlyTchar() {
        let tchar = Set("!#$%&'*+-.^_`|~0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ".utf8)
        for byte in UInt8.min...UInt8.max {
            #expect(HTTPRequestHead.isTokenByte(byte) == tchar.contains(byte), "\(byte)")
        }
    }

    @Test func whatLibwebsocketsMangledIsTakenAsSent() throws {
        // ';' is no separator: the id checked is "dev;1", which is not a valid id.
        #expect(try head("/ws/app?device_id=dev;1&token=t").argument("device_id") == "dev;1")
        // '+' stays '+', '%3D' in a name stays '='; dot segments are not folded.
        #expect(try head("/a?x+y=1").arguments == [.init(name: "x+y", value: "1")])
        #expect(try head("/a?x%3Dy=1").arguments == [.init(name: "x=y", value: "1")])
        #expect(try head("/ws/../ws/app").path == "/ws/../ws/app")
        #expect(try head("/a?b").arguments == [.init(name: "b", value: "")])
        #expect(try head("/a?&&b=1&").arguments == [.init(name: "b", value: "1")])
    }

    @Test(arguments: [
        // (request, status) — every nasty input gets a definite status.
        ("GET /ws/app?device_id=dev%0D%0AX-Injected:%201&token=t HTTP/1.1\r\n\r\n", 400),
        ("GET /ws/app?device_id=dev%00x HTTP/1.1\r\n\r\n", 400),
        ("GET /ws/app?device_id=dev%0 HTTP/1.1\r\n\r\n", 400),
        ("GET /ws/app?device_id=dev%zz HTTP/1.1\r\n\r\n", 400),
        ("GET /ws/app?device_id=%FF HTTP/1.1\r\n\r\n", 400),          // not UTF-8
        ("GET /ws%7Fapp HTTP/1.1\r\n\r\n", 400),
        ("GET /ws/app?device_id=a b HTTP/1.1\r\n\r\n", 400),          // two spaces: four parts
        ("GET /ws/app\u{01} HTTP/1.1\r\n\r\n", 400),
        ("GET /ws/\u{00E9} HTTP/1.1\r\n\r\n", 400),                   // raw non-ASCII in the target
        ("GET http://evil/ws/app HTTP/1.1\r\n\r\n", 400),
        ("GET * HTTP/1.1\r\n\r\n", 400),
        ("GET /a#frag HTTP/1.1\r\n\r\n", 400),
        ("GET /a HTTP/2.0\r\n\r\n", 505),
        ("GET /a HTTP/1.1 extra\r\n\r\n", 400),
        ("G(T /a HTTP/1.1\r\n\r\n", 400),
        ("GET /a HTTP/1.1\nHost: x\r\n\r\n", 400),                    // bare LF
        ("GET /a HTTP/1.1\r\nHost: x\rY: z\r\n\r\n", 400),            // bare CR
        ("GET /a HTTP/1.1\r\nHost: x\r\n folded\r\n\r\n", 400),
        ("GET /a HTTP/1.1\r\nBad Name: x\r\n\r\n", 400),
        ("GET /a HTTP/1.1\r\n: x\r\n\r\n", 400),
        ("GET /a HTTP/1.1\r\nNoColon\r\n\r\n", 400),
        ("GET /a HTTP/1.1\r\nX: a\u{00}b\r\n\r\n", 400),
        ("GET /a HTTP/1.1\r\nX: a\u{1B}b\r\n\r\n", 400),
        ("GET /a HTTP/1.1\r\nHost: a\r\nHost: b\r\n\r\n", 400),
        ("POST /a HTTP/1.1\r\nContent-Length: 5\r\nContent-Length: 6\r\n\r\n", 400),
        ("POST /a HTTP/1.1\r\nContent-Length: -1\r\n\r\n", 400),
        ("POST /a HTTP/1.1\r\nContent-Length: 5\r\nTransfer-Encoding: chunked\r\n\r\n", 400),
    ])
    func nastyHeadsAreRefused(request: String, status: Int) {
        guard case .invalid(let error) = parse(request) else { Issue.record("accepted: \(request.debugDescription)"); return }
        #expect(error.status == status, "\(request.debugDescription): \(error)")
    }

    @Test func repeatedCredentialsAreAnError() throws {
        let head = try head("/ws/app?device_id=a&device_id=b&token=t")
        #expect(throws: RelayError.self) { try head.argument("device_id") }
        #expect(try head.argument("token") == "t")
        #expect(try head.argument("absent") == nil)
    }

    @Test func sizeLimitsGive414And431AndNeverWaitForever() {
        var limits = HTTPRequestHead.Limits()
        limits.requestLine = 100
        limits.query = 50
        limits.headerBytes = 60
        limits.headerCount = 3
        // A long request line: 414 as soon as the limit is passed, CRLF or not.
        #expect(parse("GET /" + String(repeating: "a", count: 200), limits: limits) == .invalid(RelayError(.uriTooLong, "the request line is over 100 bytes")))
        guard case .invalid(let query) = parse("GET /a?" + String(repeating: "b", count: 60) + " HTTP/1.1\r\n\r\n", limits: limits)
        else { Issue.record("long query accepted"); return }
        #expect(query.status == 414)
        guard case .invalid(let big) = parse("GET /a HTTP/1.1\r\nX: " + String(repeating: "c", count: 70), limits: limits)
        else { Issue.record("large header accepted"); return }
        #expect(big.status == 431)
        guard case .invalid(let many) = parse("GET /a HTTP/1.1\r\nA: 1\r\nB: 2\r\nC: 3\r\nD: 4\r\n\r\n", limits: limits)
        else { Issue.record("many headers accepted"); return }
        #expect(many.status == 431)
        // Short of the limits and of the blank line: wait for more.
        #expect(parse("GET /a HTTP/1.1\r\nA: 1\r", limits: limits) == .incomplete)
        #expect(parse("GET /a HT", limits: limits) == .incomplete)
    }

    @Test func everyPrefixOfAValidHeadIsIncomplete() {
        let text = Array("GET /ws/robot?device_id=r HTTP/1.1\r\nHost: h\r\nAuthorization: Bearer x\r\n\r\n".utf8)
        for n in 0..<text.count {
            #expect(HTTPRequestHead.parse(Array(text[..<n])) == .incomplete, "prefix \(n)")
        }
        guard case .complete(_, let length) = HTTPRequestHead.parse(text) else { Issue.record("not complete"); return }
        #expect(length == text.count)
    }
}
