import Foundation
import Testing
import RelayTestSupport

/// HTTP to the robot through the relay (docs/protocol.md v1.1), with a raw robot socket playing the
/// robot leg, so every frame the relay sends and every answer shape can be checked exactly.
/// (The Python tests cover the same route end to end with the real bridge.)
@Suite struct RobotHTTPTests {
    /// Sends a request through the relay without waiting for the answer.
    func send(_ f: RelayFixture, _ method: String, _ target: String, token: String?, headers: [String: String] = [:],
              body: [UInt8] = []) throws -> TestSocket {
        let socket = try TestSocket(port: f.port, timeout: 10)
        var head = "\(method) \(target) HTTP/1.1\r\nHost: relay\r\n"
        if let token { head += "Authorization: Bearer \(token)\r\n" }
        for (k, v) in headers { head += "\(k): \(v)\r\n" }
        head += "Content-Length: \(body.count)\r\n\r\n"
        try socket.send(Array(head.utf8) + body)
        return socket
    }

    func robotReady(_ f: RelayFixture) throws -> WebSocketTestClient {
        let robot = try f.robot()
        _ = try robot.receive(until: { ($0["data"] as? [String: Any])?["apps"] != nil })  // app_presence
        return robot
    }

    /// The next `http_request` frame (skipping pushes such as turn_credentials).
    func nextRequest(_ robot: WebSocketTestClient) throws -> [String: Any] {
        try robot.receive(until: { $0["type"] as? String == "http_request" })
    }

    @Test func requestGoesOverTheRobotLegAndTheAnswerComesBackAsSent() throws {
        let f = try RelayFixture()
        let robot = try robotReady(f)
        let body = Array(#"{"mission_name":"sit_training","dog_id":"dog_001"}"#.utf8)
        let client = try send(f, "POST", "/api/devices/dev1/robot/missions/start?a=1&b=%20x", token: f.appTokens["dev1"],
                              headers: ["Content-Type": "application/json", "Cookie": "secret=1", "X-Trace": "t1",
                                        "Connection": "close, X-Hop", "X-Hop": "drop me"], body: body)
        let request = try nextRequest(robot)
        #expect(request["method"] as? String == "POST")
        #expect(request["path"] as? String == "/missions/start")
        #expect(request["query"] as? String == "a=1&b=%20x")
        let headers = try #require(request["headers"] as? [String: String])
        #expect(headers["content-type"] == "application/json")
        #expect(headers["x-trace"] == "t1")
        for dropped in ["authorization", "cookie", "host", "connection", "x-hop", "content-length"] {
            #expect(headers[dropped] == nil, "\(dropped) must not reach the robot")
        }
        #expect(Data(base64Encoded: try #require(request["body"] as? String)).map(Array.init) == body)
        let id = try #require(request["id"] as? String)
        // Chunked: a head with the first part, then two body frames; one unsafe header is dropped.
        let answer = Array(#"{"success":true,"mission_id":"m1"}"#.utf8)
        try robot.send(#"{"type":"http_response","id":"\#(id)","status":201,"headers":{"content-type":"application/json","x-robot":["a","b"],"x-bad":"a\r\nInjected: yes"},"body":"\#(Data(answer[..<5]).base64EncodedString())","more":true}"#)
        try robot.send(#"{"type":"http_body","id":"\#(id)","body":"\#(Data(answer[5..<12]).base64EncodedString())","more":true}"#)
        try robot.send(#"{"type":"http_body","id":"\#(id)","body":"\#(Data(answer[12...]).base64EncodedString())","more":false}"#)
        let response = try HTTPTestClient.readResponse(client)
        #expect(response.status == 201)
        #expect(response.body == answer)
        #expect(response.headers["content-type"] == "application/json")
        #expect(response.headers["injected"] == nil && response.headers["x-bad"] == nil)
        #expect(response.headers["x-robot"] != nil)
    }

    @Test func refusalsCarryTheContractsStatusesAndBodies() throws {
        let f = try RelayFixture(devices: ["dev1", "dev2"])
        func status(_ token: String?, _ target: String = "/api/devices/dev1/robot/mode") throws -> (Int, String) {
            let r = try HTTPTestClient.readResponse(try send(f, "GET", target, token: token))
            return (r.status, (try? r.json())?["error"] as? String ?? "")
        }
        #expect(try status(nil).0 == 401)
        #expect(try status("wimz_a_unknown").0 == 401)
        #expect(try status(f.robotTokens["dev1"]) == (403, "wrong_role"))
        #expect(try status(f.appTokens["dev2"]) == (403, "wrong_device"))
        #expect(try status(f.appTokens["dev1"], "/api/devices/bad%20id/robot/mode").0 == 400)
        let offline = try HTTPTestClient.readResponse(try send(f, "GET", "/api/devices/dev1/robot/mode", token: f.appTokens["dev1"]))
        #expect(offline.status == 503)
        #expect(offline.headers["retry-after"] == "1")
        #expect(try offline.json()["error"] as? String == "device_offline")
        let options = try HTTPTestClient.readResponse(try send(f, "OPTIONS", "/api/devices/dev1/robot/mode", token: f.appTokens["dev1"]))
        #expect(options.status == 405)
        #expect(options.headers["allow"]?.contains("PATCH") == true)
    }

    @Test func timeoutDisconnectMalformedAndOversizedAnswersBecome5xx() throws {
        let f = try RelayFixture(environment: ["WIMZ_ROBOT_HTTP_TIMEOUT": "1", "WIMZ_ROBOT_HTTP_MAX_BODY": "1000"])
        let token = f.appTokens["dev1"]
        var robot = try robotReady(f)

        // No answer: 504 within the timeout.
        let started = Date()
        let silent = try HTTPTestClient.readResponse(try send(f, "GET", "/api/devices/dev1/robot/mode", token: token))
        #expect(silent.status == 504)
        #expect(try silent.json()["error"] as? String == "robot_timeout")
        #expect(Date().timeIntervalSince(started) < 5)
        _ = try nextRequest(robot)

        // A body that is not base64, a response over the limit.
        for (answer, code) in [(#""body":"***""#, "bad_robot_response"),
                               (#""body":"\#(Data(repeating: 65, count: 1001).base64EncodedString())""#, "response_too_large")] {
            let client = try send(f, "GET", "/api/devices/dev1/robot/x", token: token)
            let id = try #require(try nextRequest(robot)["id"] as? String)
            try robot.send(#"{"type":"http_response","id":"\#(id)","status":200,\#(answer)}"#)
            let r = try HTTPTestClient.readResponse(client)
            #expect(r.status == 502)
            #expect(try r.json()["error"] as? String == code)
        }

        // A request body over the limit: 413 before anything reaches the robot.
        let big = try HTTPTestClient.readResponse(try send(f, "POST", "/api/devices/dev1/robot/x", token: token,
                                                           body: Array(repeating: 66, count: 1001)))
        #expect(big.status == 413)

        // The robot leaves while a request waits: 502, and the relay carries on.
        let waiting = try send(f, "GET", "/api/devices/dev1/robot/x", token: token)
        _ = try nextRequest(robot)
        robot.close()
        let gone = try HTTPTestClient.readResponse(waiting)
        #expect(gone.status == 502)
        #expect(try gone.json()["error"] as? String == "robot_disconnected")

        // Garbage from a robot is never forwarded to apps and never fatal.
        robot = try robotReady(f)
        let app = try f.app()
        _ = try app.receiveJSON()  // device_status
        try robot.send(#"{"type":"http_response","id":"h999999","status":200}"#)
        try robot.send(#"{"type":"http_response","id":7,"status":"x"}"#)
        try robot.send(#"{"type":"event","event":"bark_detected","data":{"loudness_db":72}}"#)
        #expect(try app.receiveJSON()["event"] as? String == "bark_detected")
        let health = try HTTPClientGet(f.port, "/healthz")
        #expect(health == 200)
        let metrics = String(decoding: try HTTPTestClient.get(port: f.port, path: "/metrics").body, as: UTF8.self)
        #expect(metrics.contains(#"wimz_robot_http_requests_total{status="504"} 1"#))
        #expect(metrics.contains("wimz_robot_http_duration_seconds_count"))
    }

    func HTTPClientGet(_ port: Int, _ path: String) throws -> Int { try HTTPTestClient.get(port: port, path: path).status }

    @Test func aRefusedTokenIsAnsweredBeforeAnyBodyIsRead() throws {
        let f = try RelayFixture()
        _ = try robotReady(f)
        // The head announces a whole MiB, and none of it is sent: the refusal comes anyway.
        for (token, status) in [(nil, 401), ("wimz_a_unknown", 401), (f.robotTokens["dev1"], 403)] as [(String?, Int)] {
            let socket = try TestSocket(port: f.port, timeout: 5)
            var head = "POST /api/devices/dev1/robot/missions/start HTTP/1.1\r\nHost: relay\r\n"
            if let token { head += "Authorization: Bearer \(token)\r\n" }
            head += "Content-Length: 1048576\r\n\r\n"
            try socket.send(Array(head.utf8))
            let response = try HTTPTestClient.readResponse(socket)
            #expect(response.status == status, "\(response.text)")
        }
        // The body that does come after a refusal is read and dropped; the relay goes on.
        let socket = try TestSocket(port: f.port, timeout: 5)
        try socket.send(Array("POST /api/devices/dev1/robot/mode HTTP/1.1\r\nHost: relay\r\nContent-Length: 65536\r\n\r\n".utf8))
        #expect(try HTTPTestClient.readResponse(socket).status == 401)
        try socket.send([UInt8](repeating: 0x41, count: 65536))
        #expect(socket.waitForEOF(timeout: 5))
        #expect(try HTTPTestClient.get(port: f.port, path: "/healthz").status == 200)
    }
}

