import Testing
import RelayCore
@testable import RelayServer

/// The gate's connection as a state machine (`GatePhase`): each transition on its own, without
/// sockets (`HTTPGateTests` drives the same through a scripted socket).
@Suite struct GatePhaseTests {
    private func head(_ text: String) -> HTTPRequestHead {
        guard case .complete(let parsed, _) = HTTPRequestHead.parse(Array(text.utf8)) else { fatalError("bad test head \(text)") }
        return parsed
    }

    @Test func aHeadWaitsForItsTokenUnreadThenProceedsOnce() {
        var phase = GatePhase.accepted
        let get = head("GET /api/turn/credentials HTTP/1.1\r\nHost: x\r\n\r\n")
        guard case .pauseReading = phase.headRead(get, wait: .waiting) else { Issue.record("\(phase)"); return }
        guard case .leave = phase.onReadable else { Issue.record("read while waiting: \(phase)"); return }
        #expect(!phase.owesItsRequest)  // its wait is bounded by the lookup's, not the request deadline
        #expect(phase.credentialArrived()?.path == get.path)
        #expect(phase.credentialArrived() == nil)  // a second wake-up finds nothing waiting
        // Routed next, not read: the head is not read a second time.
        guard case .routing = phase, case .leave = phase.onReadable else { Issue.record("\(phase)"); return }
    }

    /// Each phase holds its own bytes: the head's until it is whole, the body's until all of it
    /// is in, the answer's until it is out.
    @Test func eachPhaseHoldsOnlyItsOwnBytes() {
        var phase = GatePhase.accepted
        func bytes(_ text: String) -> [UInt8] { Array(text.utf8) }
        let start = bytes("POST /x HTTP/1.1\r\n").withUnsafeBytes { phase.headArrived($0) }
        #expect(start == bytes("POST /x HTTP/1.1\r\n"))
        let whole = bytes("Content-Length: 5\r\n\r\n").withUnsafeBytes { phase.headArrived($0) }
        #expect(whole == bytes("POST /x HTTP/1.1\r\nContent-Length: 5\r\n\r\n"))
        let post = head(String(decoding: whole, as: UTF8.self))
        guard case .proceed = phase.headRead(post, wait: .ready), case .routing = phase else { Issue.record("\(phase)"); return }
        let request = HTTPRequest(client: HTTPClient(OpaquePointer(bitPattern: 1)!), head: post, peerAddress: "203.0.113.9")
        let routed = Router.Routed(route: Route(["POST"], "/x", .open(.healthz)), parameters: [:], entry: nil)
        phase.admitted(AdmittedRequest(request: request, routed: routed), length: 5)
        #expect(phase.onReadable == .readBody(wanted: 5))
        let part = bytes("hel").withUnsafeBytes { phase.bodyArrived($0) }
        #expect(part == nil)
        #expect(phase.onReadable == .readBody(wanted: 2))
        let body = bytes("lo").withUnsafeBytes { phase.bodyArrived($0) }
        #expect(body?.body == bytes("hello") && body?.0.request.head.path == "/x")
        guard case .routing = phase else { Issue.record("\(phase)"); return }
        let answering = phase.answer(bytes("HTTP/1.1 200 OK\r\n\r\n"), then: .close)
        #expect(answering)
        phase.wrote(9)
        #expect(phase.pendingAnswer.map { Array($0) } == bytes("200 OK\r\n\r\n"))
        phase.wrote(10)
        #expect(phase.pendingAnswer?.isEmpty == true)
        guard case .close = phase.answerWritten() else { Issue.record("\(phase)"); return }
    }

    @Test func aHeadRefusedBeforeItsLookupIsAnsweredEarly() {
        var phase = GatePhase.accepted
        let refusal = RelayError(.tooManyRequests, "slow down")
        guard case .answerEarly(let error) = phase.headRead(head("GET / HTTP/1.1\r\n\r\n"), wait: .refused(refusal)) else {
            Issue.record("\(phase)"); return
        }
        #expect(error == refusal)
    }

    /// An early answer: what arrives while it is written and after is dropped within its budget;
    /// the connection lingers after the answer and closes when the budget is spent.
    @Test func anEarlyAnswerDropsWithinItsBudgetThenLingers() {
        var phase = GatePhase.accepted
        let lingering = phase.answer([], then: .linger(budget: 10))
        #expect(lingering)
        guard case .drop(10) = phase.onReadable else { Issue.record("\(phase)"); return }
        guard case .keepReading = phase.dropped(4) else { Issue.record("\(phase)"); return }
        guard case .linger = phase.answerWritten() else { Issue.record("\(phase)"); return }
        guard case .drop(6) = phase.onReadable else { Issue.record("\(phase)"); return }
        guard case .keepReading = phase.dropped(5) else { Issue.record("\(phase)"); return }
        guard case .close = phase.dropped(1) else { Issue.record("\(phase)"); return }
    }

    /// The body all in while the answer is still going out: reading stops, and the connection
    /// closes once the answer is out (nothing is left to reset it).
    @Test func aBodyThatEndsBeforeTheAnswerIsOutClosesAfterIt() {
        var phase = GatePhase.accepted
        _ = phase.answer([], then: .linger(budget: 5))
        guard case .pauseReading = phase.dropped(5) else { Issue.record("\(phase)"); return }
        guard case .pauseReading = phase.onReadable else { Issue.record("\(phase)"); return }
        guard case .close = phase.answerWritten() else { Issue.record("\(phase)"); return }
    }

    @Test func aClientThatClosesEndsTheLinger() {
        var phase = GatePhase.accepted
        _ = phase.answer([], then: .linger(budget: 1000))
        guard case .linger = phase.answerWritten() else { Issue.record("\(phase)"); return }
        guard case .close = phase.dropped(nil) else { Issue.record("\(phase)"); return }
    }

    @Test func aDeferredAnswerIsTakenOnlyWhileDeferred() {
        var phase = GatePhase.accepted
        let early = phase.answer([], then: .close, deferred: true)
        #expect(!early)  // it moved on, or never deferred
        #expect(phase.owesItsRequest)
        _ = phase.headRead(head("GET /admin/devices HTTP/1.1\r\n\r\n"), wait: .ready)
        phase.deferred()
        #expect(!phase.owesItsRequest)
        guard case .leave = phase.onReadable else { Issue.record("\(phase)"); return }
        let deferredAnswer = phase.answer([], then: .close, deferred: true)
        #expect(deferredAnswer)
        guard case .pauseReading = phase.onReadable else { Issue.record("\(phase)"); return }
        let second = phase.answer([], then: .close, deferred: true)
        #expect(!second)  // a late second answer is dropped
        guard case .close = phase.answerWritten() else { Issue.record("\(phase)"); return }
    }

    @Test(arguments: [
        ("GET /ws/app HTTP/1.1\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n\r\n", HTTPRequestHead.GateRoute.upgrade),
        ("POST /ws/app HTTP/1.1\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n\r\n",
         .refuse(RelayError(.badRequest, "a WebSocket upgrade is a GET"))),
        ("POST /api/x HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n",
         .refuse(RelayError(.lengthRequired, "send the body with Content-Length"))),
        ("POST /api/x HTTP/1.1\r\nContent-Length: 12\r\n\r\n", .plain(contentLength: 12)),
        ("GET /healthz HTTP/1.1\r\n\r\n", .plain(contentLength: 0)),
    ])
    func aHeadIsRoutedFromItsHeadAlone(_ text: String, _ route: HTTPRequestHead.GateRoute) {
        #expect(head(text).gateRoute == route)
    }

    #if DEBUG
    @Test func anImpossibleTransitionStopsADebugBuild() async {
        await #expect(processExitsWith: .failure) {
            var phase = GatePhase.accepted
            _ = phase.answer([], then: .close)
            _ = phase.answer([], then: .close)  // a second answer
        }
        await #expect(processExitsWith: .failure) {
            var phase = GatePhase.deferred
            _ = phase.dropped(1)
        }
    }
    #endif
}
