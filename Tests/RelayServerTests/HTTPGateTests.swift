import Foundation
import RelayCore
@testable import RelayServer
import Testing

/// The gate in process: bytes in as a client sends them (in any pieces), the gate's answers and
/// lws calls out, deadlines on the manual clock. (Over real sockets: HostileInputTests.)
@Suite struct HTTPGateTests {
    /// The pre-filter that lets an upgrade skip the raw read: "websocket" in any case, anywhere,
    /// including the last nine bytes; nothing shorter or different.
    @Test func mentionsWebSocketFindsTheWordInAnyCaseOnly() {
        func mentions(_ text: String) -> Bool { Array(text.utf8).withUnsafeBytes(HTTPGate.mentionsWebSocket) }
        for word in ["websocket", "WEBSOCKET", "WebSocket", "wEbSoCkEt"] {
            #expect(mentions(word))
            #expect(mentions("GET / HTTP/1.1\r\nUpgrade: \(word)\r\n\r\n"))
            #expect(mentions("ww/wsW-\(word)"))
        }
        for text in ["", "websocke", "websockex", "web socket", "websocke\r", "wEbSoCkE\u{7F}", "GET /ws/app HTTP/1.1\r\nUpgrade: h2c\r\n\r\n",
                     "websocKET".replacingOccurrences(of: "T", with: "\u{14}"), "w\u{0F}bsocket"] {
            #expect(!mentions(text), "\(text.debugDescription)")
        }
    }

    @Test func aRequestInPiecesIsServedOnceWhole() {
        let h = Harness()
        let socket = h.connect()
        #expect(h.send("POST /admin/dev", on: socket))
        #expect(h.send("ices HTTP/1.1\r\nHost: relay\r\nContent-Le", on: socket))
        #expect(h.send("ngth: 11\r\n\r\nhello", on: socket))
        #expect(h.served.isEmpty)
        #expect(!h.send(" world", on: socket))  // answered and closed
        #expect(h.served.count == 1)
        #expect(h.served.first?.head.path == "/admin/devices" && h.served.first?.body == Array("hello world".utf8))
        let response = h.response(socket)
        #expect(response.status == 200 && response.headers.contains("connection: close"))
    }

    @Test func malformedHeadsAndBodiesGetTheirStatus() {
        let h = Harness()
        func status(_ request: String) -> (Int, String?) {
            let socket = h.connect()
            #expect(h.send(request, on: socket), "lingering after the answer")
            #expect(h.io.sockets[socket]?.writesShut == true && h.io.sockets[socket]?.closeAfter == h.gate.lingering.seconds)
            #expect(!h.send("", on: socket, thenHangUp: true), "closed once the client closed")
            let response = h.response(socket)
            return (response.status, response.body["error"] as? String)
        }
        #expect(status("GET /a\u{1}b HTTP/1.1\r\n\r\n") == (400, "bad_request"))
        #expect(status("GET /\(String(repeating: "a", count: 5000)) HTTP/1.1\r\n\r\n") == (414, "uri_too_long"))
        #expect(status("GET / HTTP/1.1\r\n" + String(repeating: "X-Filler: 0123456789\r\n", count: 500) + "\r\n")
            == (431, "headers_too_large"))
        #expect(status("POST /x HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n") == (411, "length_required"))
        #expect(status("POST /x HTTP/1.1\r\nContent-Length: ten\r\n\r\n") == (400, "bad_request"))
        #expect(status("POST /x HTTP/1.1\r\nContent-Length: 70000\r\n\r\n") == (413, "too_large"))
        #expect(status("POST /ws/app HTTP/1.1\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n\r\n") == (400, "bad_request"))
        #expect(h.refused.count == 7 && h.refused.allSatisfy { $0.1 == "203.0.113.9" })
        #expect(h.served.isEmpty)
        // A route's own limit applies.
        h.bodyLimits = { $0.path == "/big" ? 100_000 : HTTPGate.bodyLimit }
        let socket = h.connect()
        #expect(h.send("POST /big HTTP/1.1\r\nContent-Length: 70000\r\n\r\n", on: socket))
        #expect(h.io.sockets[socket]?.output.isEmpty == true)  // waiting for the body
    }

    @Test func aRefusalBeforeTheBodyIsSentAtOnceAndTheBodyDropped() {
        let h = Harness()
        h.headRefusal = .error(.unknownToken, "no such token")
        let socket = h.connect()
        #expect(h.send("POST /admin/devices HTTP/1.1\r\nContent-Length: 20000\r\n\r\n", on: socket))
        #expect(h.response(socket).status == 401)
        #expect(h.io.sockets[socket]?.writesShut == true && h.io.sockets[socket]?.closeAfter == h.gate.lingering.seconds)
        #expect(h.send(String(repeating: "x", count: 19_999), on: socket))  // read and dropped
        #expect(h.io.sockets[socket]?.incoming.isEmpty == true)
        #expect(!h.send("x", on: socket))  // the last byte: closed now
        #expect(h.served.isEmpty)
    }

    /// A client that writes its whole body before it reads (Python's urllib does) gets the early
    /// answer whole: it goes out first, writes are shut, and the body is read and dropped until
    /// it is all in — even when the answer is still on its way when the body ends.
    @Test func anEarlyAnswerReachesAClientStillSendingItsBody() {
        let h = Harness()
        h.bodyLimits = { _ in 1000 }
        let socket = h.connect()
        #expect(h.send("PUT /robot HTTP/1.1\r\nContent-Length: 50000\r\n\r\n" + String(repeating: "x", count: 3000), on: socket))
        #expect(h.response(socket).status == 413 && h.io.sockets[socket]?.writesShut == true)
        for _ in 0..<46 { #expect(h.send(String(repeating: "x", count: 1000), on: socket)) }  // dropped as it comes
        #expect(!h.send(String(repeating: "x", count: 1000), on: socket))  // the last byte is in: closed, nothing unread
        #expect(h.io.sockets[socket]?.incoming.isEmpty == true && h.served.isEmpty)

        // The answer blocked in a full socket while the body finishes: answer first, then close.
        h.headRefusal = .error(.forbidden, "not yours")
        let slow = h.connect()
        h.io.writeCapacity = 10
        #expect(h.send("POST /api/x HTTP/1.1\r\nContent-Length: 500\r\n\r\n" + String(repeating: "y", count: 500), on: slow))
        #expect(h.io.sockets[slow]?.wantsWritable == true && h.io.sockets[slow]?.incoming.isEmpty == true)
        #expect(h.io.sockets[slow]?.paused == true && h.io.sockets[slow]?.writesShut == false)
        h.io.writeCapacity = .max
        #expect(h.gate.writeable(slow) == -1)
        #expect(h.response(slow).status == 403 && h.response(slow).body["error"] as? String == "forbidden")
    }

    /// What a client sends after an early answer is dropped up to the byte budget, then the
    /// socket closes as it is.
    @Test func lingeringHasAByteBudget() {
        let h = Harness()
        let socket = h.connect()
        #expect(h.send("GET /a\u{1}b HTTP/1.1\r\n\r\n", on: socket))  // malformed: nothing says how much follows
        #expect(h.response(socket).status == 400)
        let chunk = String(repeating: "z", count: 64 * 1024)
        for _ in 0..<(h.gate.lingering.bytes / chunk.utf8.count - 1) { #expect(h.send(chunk, on: socket)) }
        #expect(!h.send(chunk + "more", on: socket))
        #expect(h.io.sockets[socket]?.incoming == Array("more".utf8))
    }

    @Test func upgradesAndRequestsWaitForTheirTokenToBeRead() throws {
        let h = Harness()
        let upgrade = "GET /ws/app?device_id=d1&token=t1 HTTP/1.1\r\nHost: relay\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n\r\n"
        let first = h.connect()
        #expect(!h.send(upgrade + "FRAME", on: first))  // the raw socket goes; lws takes it over
        #expect(h.io.sockets[first]?.handedOver?.path == "/ws/app")
        #expect(h.io.sockets[first]?.incoming == Array("FRAME".utf8))  // the client's frames stay for lws

        // Its token not in memory: the upgrade waits, unread, for the lookup.
        var resumes: [() -> Void] = []
        var asked: [String?] = []
        h.holdForCredential = { head, resume in
            asked.append(head.credential?.token)
            resumes.append(resume)
            return .waiting
        }
        let held = h.connect()
        #expect(h.send(upgrade, on: held))
        #expect(asked == ["t1"])
        #expect(h.io.sockets[held]?.paused == true && h.io.sockets[held]?.handedOver == nil)
        h.clock.advance(seconds: 11)
        h.gate.expire(now: h.clock.monotonic)
        #expect(h.io.sockets[held]?.closingSoon == false)  // a waiting upgrade is not a slow client
        h.holdForCredential = nil
        resumes.removeFirst()()
        #expect(try h.io.sockets[held]?.handedOver?.argument("device_id") == "d1")
        #expect(h.io.sockets[held]?.closingSoon == true)

        // A plain request too, its body read once its token is in.
        h.holdForCredential = { _, resume in resumes.append(resume); return .waiting }
        let request = h.connect()
        #expect(h.send("POST /api/x HTTP/1.1\r\nHost: relay\r\nAuthorization: Bearer t2\r\nContent-Length: 2\r\n\r\n", on: request))
        #expect(h.io.sockets[request]?.paused == true && h.served.isEmpty)
        h.holdForCredential = nil
        resumes.removeFirst()()
        #expect(h.io.sockets[request]?.paused == false)
        _ = h.send("{}", on: request)
        #expect(h.served.map(\.head.path) == ["/api/x"])
    }

    /// What the listener peeked at accept: an upgrade goes to lws at once, anything else is read
    /// from those bytes (no second peek), a part of a head waits for the rest as usual.
    @Test func theBytesFoundAtAcceptAreReadOnce() {
        let h = Harness()
        let upgrade = "GET /ws/app?device_id=d1 HTTP/1.1\r\nHost: relay\r\nUpgrade: WebSocket\r\nConnection: Upgrade\r\n\r\n"
        guard case .handOver(let head, let length) = h.arrival(upgrade + "FRAME") else { Issue.record("not handed over"); return }
        #expect(head.path == "/ws/app" && length == upgrade.utf8.count)
        for text in ["GET /healthz HTTP/1.1\r\nHost: relay\r\n\r\n", String(upgrade.dropLast(2)),  // not an upgrade; not whole yet
                     upgrade.replacingOccurrences(of: "GET", with: "POST")] {  // not a GET: the gate's read refuses it
            guard case .read = h.arrival(text) else { Issue.record("\(text.debugDescription) is not read"); return }
        }
        #expect(h.lookupsAsked == 1)

        func accept(peeked text: String) -> (OpaquePointer, Int32) {
            let socket = h.newSocket()
            h.io.sockets[socket, default: .init()].incoming = Array(text.utf8)
            return (socket, Array(text.utf8).withUnsafeBytes { h.gate.accepted(socket, peeked: $0) })
        }
        let (whole, status) = accept(peeked: "GET /healthz HTTP/1.1\r\nHost: relay\r\n\r\n")
        #expect(status == -1)  // answered: close
        #expect(h.served.map(\.head.path) == ["/healthz"] && h.response(whole).status == 200)
        #expect(h.io.sockets[whole]?.incoming.isEmpty == true)  // the head was read off the socket

        let (partial, waiting) = accept(peeked: "GET /heal")
        #expect(waiting == 0 && h.served.count == 1)
        #expect(!h.send("thz HTTP/1.1\r\nHost: relay\r\n\r\n", on: partial))  // answered and closed
        #expect(h.served.map(\.head.path) == ["/healthz", "/healthz"] && h.response(partial).status == 200)
    }

    /// A whole upgrade at accept is decided there, once: its head parsed, its token read and its
    /// lookup asked for one time, whether it goes to lws now, waits, or is refused — and a refused
    /// one is answered from that decision (its head taken off the socket), not parsed, hashed and
    /// counted again by the gate's own read.
    @Test func aWholeUpgradeIsDecidedOnceAtAccept() {
        let h = Harness()
        let upgrade = "GET /ws/app?device_id=d1&token=t1 HTTP/1.1\r\nHost: relay\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n\r\n"
        let busy = RelayError.authentication(.storeUnavailable, "too many tokens are being read from the store; retry shortly")
        h.holdForCredential = { _, _ in .refused(busy) }
        guard case .refuse(let error, let length) = h.arrival(upgrade) else { Issue.record("not refused"); return }
        #expect(error == busy && length == upgrade.utf8.count)
        let socket = h.newSocket()
        h.io.sockets[socket, default: .init()].incoming = Array((upgrade + "FRAME").utf8)
        #expect(h.gate.accepted(socket, refusing: error, headLength: length) == 0)  // answered; lingering
        #expect(h.response(socket).status == 503 && h.response(socket).body["error"] as? String == "store_unavailable")
        #expect(h.io.sockets[socket]?.incoming == Array("FRAME".utf8) && h.io.sockets[socket]?.writesShut == true)
        #expect(h.credentialsRead == 1 && h.lookupsAsked == 1 && h.refused.isEmpty && h.io.sockets[socket]?.handedOver == nil)

        // Waiting: handed over once its token is in, with the head and length found at accept.
        var resume: (() -> Void)?
        h.holdForCredential = { _, go in resume = go; return .waiting }
        var ready: [(String, Int)] = []
        guard case .waiting = h.arrival(upgrade, whenReady: { ready.append(($0.credential?.token ?? "", $1)) }) else {
            Issue.record("not waiting"); return
        }
        #expect(ready.isEmpty)
        resume?()
        #expect(ready.map(\.0) == ["t1"] && ready.map(\.1) == [upgrade.utf8.count])
        #expect(h.credentialsRead == 2 && h.lookupsAsked == 2)
    }

    /// At most `capacity` connections linger after an early answer; past it an early answer
    /// closes once it is out, counted, and a place comes back when a lingering one closes.
    @Test func lingeringConnectionsAreBounded() {
        let h = Harness(lingering: GateLingering(largestBody: HTTPGate.bodyLimit, capacity: 2))
        let malformed = "GET /a\u{1}b HTTP/1.1\r\n\r\n"
        let (first, second) = (h.connect(), h.connect())
        #expect(h.send(malformed, on: first) && h.send(malformed, on: second))  // both linger
        #expect(h.lingering.count == 2 && h.lingering.refused == 0)
        let third = h.connect()
        #expect(!h.send(malformed, on: third))  // answered, then closed at once
        #expect(h.response(third).status == 400 && h.io.sockets[third]?.writesShut != true)
        #expect(h.lingering.count == 2 && h.lingering.refused == 1)
        #expect(!h.send("", on: first, thenHangUp: true))  // the client closed: its place is free
        #expect(h.lingering.count == 1)
        let fourth = h.connect()
        #expect(h.send(malformed, on: fourth) && h.lingering.count == 2)
    }

    /// The linger's byte budget covers the largest body any route takes (the robot's API, up to
    /// `WIMZ_ROBOT_HTTP_MAX_BODY`), not only the admin API's 64 KiB.
    @Test func theLingerBudgetCoversTheLargestBodyAnyRouteTakes() {
        var configuration = RelayConfiguration(databaseURL: "", migrationsDirectory: "")
        configuration.robotHTTPMaxBody = RelayConfiguration.robotHTTPMaxBodyLimit
        let largest = Route.BodyLimit.largest(configuration)
        #expect(Routes.table.allSatisfy { $0.bodyLimit.bytes(configuration) <= largest })
        #expect(largest == RelayConfiguration.robotHTTPMaxBodyLimit)
        #expect(GateLingering(largestBody: largest).bytes > RelayConfiguration.robotHTTPMaxBodyLimit)
    }

    @Test func aRequestMustArriveWithinTenSecondsOnTheRelaysClock() {
        let h = Harness()
        let slow = h.connect()
        #expect(h.send("GET /healthz HTTP/1.1\r\n", on: slow))
        h.clock.advance(seconds: 9.9)
        h.gate.expire(now: h.clock.monotonic)
        #expect(h.io.sockets[slow]?.closingSoon == false)
        h.answer = nil  // the next request waits for the database
        let deferred = h.connect()
        #expect(h.send("GET /admin/devices HTTP/1.1\r\n\r\n", on: deferred))
        #expect(h.io.sockets[deferred]?.paused == true && h.io.sockets[deferred]?.closeAfter == 30)
        h.clock.advance(seconds: 0.2)
        h.gate.expire(now: h.clock.monotonic)
        #expect(h.io.sockets[slow]?.closingSoon == true)
        h.clock.advance(seconds: 10)
        h.gate.expire(now: h.clock.monotonic)
        #expect(h.io.sockets[deferred]?.closingSoon == false)  // its own, longer timeout applies
    }

    @Test func aDeferredAnswerGoesOutThroughASlowSocket() {
        let h = Harness()
        h.answer = nil
        let socket = h.connect()
        #expect(h.send("GET /admin/devices HTTP/1.1\r\n\r\n", on: socket))
        h.io.writeCapacity = 10
        h.gate.respond(socket, with: .json(200, .object([("devices", [])])))
        #expect(h.io.sockets[socket]?.output.count == 10 && h.io.sockets[socket]?.wantsWritable == true)
        var turns = 0
        while true {
            turns += 1
            h.io.writeCapacity = 10
            if h.gate.writeable(socket) != 0 { break }
        }
        #expect(turns > 5)
        #expect(h.response(socket).status == 200 && h.response(socket).body["devices"] != nil)
        h.gate.respond(socket, with: .json(500, .object([])))  // answered once only
        #expect(h.response(socket).status == 200)
    }
}

/// The gate's listening socket over loopback.
@Suite struct GateListenerTests {
    /// Accepted connections have TCP_NODELAY from birth: the listener has it, and Linux copies
    /// it to every socket accepted from it (the gate sets nothing per connection).
    @Test func acceptedConnectionsInheritNoDelay() throws {
        let listener = try GateListener(host: "127.0.0.1", port: 0, tcp: TCPLiveness(.defaults))
        let client = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        defer { close(client) }
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_port = UInt16(listener.port).bigEndian
        address.sin_addr.s_addr = UInt32(0x7F00_0001).bigEndian
        let connected = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { connect(client, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
        }
        #expect(connected == 0)
        _ = "GET / HTTP/1.1\r\n".withCString { send(client, $0, 16, 0) }  // TCP_DEFER_ACCEPT waits for data
        var accepted: Int32 = -1
        for _ in 0..<200 where accepted < 0 {
            accepted = accept(listener.listenFD, nil, nil)
            if accepted < 0 { usleep(10_000) }
        }
        defer { close(accepted) }
        #expect(accepted >= 0)
        var value: Int32 = 0
        var length = socklen_t(MemoryLayout<Int32>.size)
        #expect(getsockopt(accepted, Int32(IPPROTO_TCP), TCP_NODELAY, &value, &length) == 0 && value == 1)
    }
}
