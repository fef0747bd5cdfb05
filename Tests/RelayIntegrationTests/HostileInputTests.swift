import Foundation
import Testing
import RelayTestSupport

/// Requests as hostile clients and scanners send them: each gets the contract's status and a
/// JSON error body from the relay's gate — never a dropped connection, never a misread id.
@Suite struct HostileInputTests {
    /// Sends raw bytes and reads the answer (nil when the connection closed without one).
    func exchange(_ f: RelayFixture, _ request: String) throws -> HTTPTestResponse? {
        let socket = try TestSocket(port: f.port)
        try socket.send(Array(request.utf8))
        return try? HTTPTestClient.readResponse(socket)
    }

    func upgrade(_ target: String, headers: String = "") -> String {
        "GET \(target) HTTP/1.1\r\nHost: relay\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
            + "Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n\(headers)\r\n"
    }

    @Test func theDeviceIDCheckedIsTheOneSent() throws {
        let f = try RelayFixture(devices: ["dev", "other"])
        // lws 4.1.6 splits "dev;1" at ';' and would check "dev": the gate refuses the id instead.
        let split = try #require(try exchange(f, upgrade("/ws/app?device_id=dev;1&token=\(f.appTokens["other"]!)")))
        #expect(split.status == 400 && split.version == "HTTP/1.1")
        #expect(try split.json()["error"] as? String == "bad_request")
        // A decoded CR LF must not end the request line there (and lose the token).
        let injected = try #require(try exchange(f, upgrade("/ws/app?device_id=dev%0D%0AX-Injected:%201&token=\(f.appTokens["dev"]!)")))
        #expect(injected.status == 400)
        #expect(try injected.json()["message"] as? String == "control character in the query")
        // %00 gets an answer, not a dropped connection.
        let nul = try #require(try exchange(f, upgrade("/ws/app?device_id=dev%00x&token=\(f.appTokens["dev"]!)")))
        #expect(nul.status == 400)
        // Twice the same argument: which one counts is ambiguous, so neither does.
        for query in ["device_id=dev&device_id=other&token=\(f.appTokens["dev"]!)",
                      "device_id=dev&token=\(f.appTokens["dev"]!)&token=\(f.appTokens["other"]!)"] {
            let repeated = try #require(try exchange(f, upgrade("/ws/app?\(query)")))
            #expect(repeated.status == 400, "\(query)")
        }
        // And a well-formed request still upgrades.
        let fine = try #require(try exchange(f, upgrade("/ws/app?device_id=dev&token=\(f.appTokens["dev"]!)")))
        #expect(fine.status == 101)
    }

    @Test func oversizedHeadsGet414Or431WithJSON() throws {
        let f = try RelayFixture()
        let long = try #require(try exchange(f, upgrade("/ws/app?device_id=dev1&pad=\(String(repeating: "a", count: 10_000))")))
        #expect(long.status == 414)
        #expect(try long.json()["error"] as? String == "uri_too_long")
        let headers = (0..<40).map { "X-Filler-\($0): \(String(repeating: "b", count: 300))\r\n" }.joined()
        let big = try #require(try exchange(f, upgrade("/ws/app?device_id=dev1", headers: headers)))
        #expect(big.status == 431)
        #expect(try big.json()["error"] as? String == "headers_too_large")
        // The relay is still there.
        #expect(try HTTPTestClient.get(port: f.port, path: "/healthz").status == 200)
    }

    @Test func malformedRequestsGetAnAnswerAndTheRelayStaysUp() throws {
        let f = try RelayFixture()
        let cases: [(String, Int)] = [
            ("GET /healthz HTTP/1.1\nHost: x\n\n", 400),
            ("GET /healthz HTTP/1.1\r\nHost: x\r\n folded\r\n\r\n", 400),
            ("GET /healthz HTTP/1.1\r\nHost: a\r\nHost: b\r\n\r\n", 400),
            ("GET /healthz HTTP/3.0\r\n\r\n", 505),
            ("GET http://evil/healthz HTTP/1.1\r\n\r\n", 400),
            ("DELETE /healthz HTTP/1.1\r\nHost: x\r\n\r\n", 405),
            ("POST /admin/devices HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n", 411),
            ("POST /admin/devices HTTP/1.1\r\nHost: x\r\nContent-Length: 100000\r\n\r\n", 413),
            ("GET /ws/robot?device_id=%zz HTTP/1.1\r\nHost: x\r\n\r\n", 400),
        ]
        for (request, status) in cases {
            let answer = try exchange(f, request)
            #expect(answer?.status == status, "\(request.debugDescription)")
            #expect((try? answer?.json()["error"]) != nil, "\(request.debugDescription)")
        }
        // A client that sends half a head and stops is closed (10 s); others are served meanwhile.
        let slow = try TestSocket(port: f.port)
        try slow.send(Array("GET /healthz HT".utf8))
        #expect(try HTTPTestClient.get(port: f.port, path: "/healthz").status == 200)
        let metrics = try HTTPTestClient.get(port: f.port, path: "/metrics").text
        // The gate refused all but the DELETE, which the router answered (405 with its Allow).
        #expect(metrics.contains("wimz_http_requests_refused_total \(cases.count - 1)"))
        _ = slow
    }

    @Test func plainHTTPResponsesCloseTheirConnection() throws {
        let f = try RelayFixture()
        let socket = try TestSocket(port: f.port)
        try socket.send(Array("GET /healthz HTTP/1.1\r\nHost: x\r\n\r\nGET /healthz HTTP/1.1\r\nHost: x\r\n\r\n".utf8))
        let first = try HTTPTestClient.readResponse(socket)
        #expect(first.status == 200 && first.headers["connection"] == "close")
        // Each request has its own connection: the pipelined second one is not read.
        #expect((try? HTTPTestClient.readResponse(socket)) == nil)
    }
}
