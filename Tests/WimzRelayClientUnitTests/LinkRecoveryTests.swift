import Foundation
import Testing
@testable import WimzRelayClient
import WimzProtocol

/// Recovering a phone's link on the scripted transport and the hand-moved clock: a stream that
/// stops is probed within seconds and, unanswered, a replacement is opened beside the quiet
/// socket (taken when it opens, abandoned when the old one shows life); connects are staggered,
/// the first to open wins; what the old socket delivered is not shown twice.
@Suite struct LinkRecoveryTests {
    @Test func theEstimateFitsTheProbeToTheLinkAndItsTraffic() {
        var estimate = LinkEstimate()
        let interval = Duration.seconds(24)
        #expect(estimate.quietBeforeProbe(within: interval) == interval, "no traffic seen: no early probe")
        #expect(estimate.probeWait == .seconds(5), "no round trip measured: the longest wait")
        for _ in 0..<8 { estimate.noteGap(.milliseconds(250)) }
        #expect(estimate.quietBeforeProbe(within: interval) == .seconds(3), "a stream: 3 s at the least")
        for _ in 0..<8 { estimate.noteGap(.seconds(20)) }
        #expect(estimate.quietBeforeProbe(within: interval) == interval, "the relay's pings only: the usual interval")
        estimate.noteOpened(in: .milliseconds(1000))
        #expect(estimate.smoothedRTT == .milliseconds(500))
        estimate.noteOpened(in: .seconds(9))
        #expect(estimate.smoothedRTT == .milliseconds(500), "a pong-less opening counts only until a first sample")
        #expect(estimate.probeWait == .milliseconds(1500), "500 ms + 4 × 250 ms")
        for _ in 0..<40 { estimate.noteRoundTrip(.milliseconds(100)) }
        #expect(estimate.probeWait == .seconds(1), "a fast link: at least 1 s")
        for _ in 0..<4 { estimate.noteRoundTrip(.seconds(30)) }
        #expect(estimate.probeWait == .seconds(5), "a wild link: at most 5 s")
    }

    @Test func aRequestsWaitIsThreeRetransmissionTimeoutsOfTheLink() {
        var estimate = LinkEstimate()
        #expect(estimate.requestWait == .seconds(5), "nothing measured yet")
        estimate.noteRoundTrip(.milliseconds(500))
        #expect(estimate.requestWait == .milliseconds(4500), "3 × (500 ms + 4 × 250 ms)")
        for _ in 0..<40 { estimate.noteRoundTrip(.milliseconds(100)) }
        #expect(estimate.requestWait == .seconds(2), "a fast link: at least 2 s")
        for _ in 0..<4 { estimate.noteRoundTrip(.seconds(30)) }
        #expect(estimate.requestWait == .seconds(10), "a wild link: at most 10 s")
    }

    /// A GET on a lossy link: unanswered after its wait, the same request goes again beside the
    /// first, and the first answer wins; the relay's refusal ends the race at once (it would say the
    /// same again); an attempt that fails with none other in flight ends it with its error.
    @Test func anUnansweredRequestIsSentAgainBesideTheFirst() async throws {
        let clock = ManualClock()
        let answered = RequestRace(clock)
        try await until { answered.started == 1 && clock.deadlines == [.seconds(2)] }
        clock.advance(by: .seconds(2))
        try await until { answered.started == 2 }
        answered.answers[1].resolve(.success(2))
        #expect(try await answered.result.value.get() == 2)
        answered.answers[0].resolve(.success(1))  // late: dropped
        #expect(answered.started == 2, "no third attempt after an answer")

        let refusal = RelayClientError.refusal(status: 503, body: Data())
        let refused = RequestRace(clock)
        try await until { refused.started == 1 }
        refused.answers[0].resolve(.failure(refusal))
        await #expect(throws: refusal) { try await refused.result.value.get() }
        #expect(refused.started == 1)

        let lost = RequestRace(clock)
        try await until { lost.started == 1 }
        lost.answers[0].resolve(.failure(RelayClientError.notConnected))
        await #expect(throws: RelayClientError.notConnected) { try await lost.result.value.get() }
        #expect(lost.started == 1, "a relay that is down is not asked again at once")
    }

    /// The robot streams events every 250 ms and the phone's address changes (nothing arrives
    /// any more): 3 s of quiet → a probe; no pong within its fitted wait (1 s here) → a fresh
    /// socket is opened beside the old one and taken: live again 4 s after the last event, not
    /// 29 s.
    @Test func aStreamThatStopsIsProbedAndTheQuietSocketReplacedWithinSeconds() async throws {
        let (clock, transport, client, socket) = try await connectedScriptedClient()
        try await stream(on: socket, clock, count: 12)
        socket.answersPings = false
        try await until { clock.deadlines == [clock.now + .seconds(3)] }
        clock.advance(by: .seconds(3))
        try await until { socket.pingsSent == 1 && clock.deadlines.contains(clock.now + .seconds(1)) }
        clock.advance(by: .seconds(1))
        let fresh = try await transport.waitForConnection(2)
        try await until { socket.isClosed && socket.closeCode == nil }  // dropped, no closing handshake
        try await until { await client.state == .connected }
        #expect(transport.connectionCount == 2 && !fresh.isClosed)
        await client.stop()
    }

    /// The link dies between the upgrade and the relay's greeting (its `device_status`, sent at
    /// once): 3 s without it → a probe; no pong within its wait (1 s) → a fresh socket beside
    /// it, taken as it opens: live again 4 s after the upgrade, not 29 s.
    @Test func aLostGreetingIsProbedAndTheSocketReplacedWithinSeconds() async throws {
        let (clock, transport, client, socket) = try await connectedScriptedClient(greeted: false)
        socket.answersPings = false
        try await until { clock.deadlines == [.seconds(3)] }
        clock.advance(by: .seconds(3))
        try await until { socket.pingsSent == 1 && clock.deadlines.contains(.seconds(4)) }
        clock.advance(by: .seconds(1))
        let fresh = try await transport.waitForConnection(2)
        try await until { socket.isClosed && socket.closeCode == nil }
        try await greet(fresh, clock)
        #expect(await client.state == .connected && fresh.pingsSent == 0)
        await client.stop()
    }

    /// A tunnel rather than a new address: the probe goes unanswered and a replacement is being
    /// opened, but the old socket delivers again first. It keeps its place; the replacement,
    /// when it opens, is closed.
    @Test func aQuietSocketThatComesBackKeepsItsPlace() async throws {
        let (clock, transport, client, socket) = try await connectedScriptedClient()
        try await stream(on: socket, clock, count: 12)
        socket.answersPings = false
        transport.holdsConnects = true
        try await until { clock.deadlines == [clock.now + .seconds(3)] }
        clock.advance(by: .seconds(3))
        try await until { socket.pingsSent == 1 && clock.deadlines.contains(clock.now + .seconds(1)) }
        clock.advance(by: .seconds(1))
        try await until { transport.heldConnects == 1 }
        socket.deliver(.text(#"{"type":"event","event":"bark_detected","data":{}}"#))
        try await until { await client.replacementRace == nil }
        transport.release()
        let late = try await transport.waitForConnection(2)
        try await until { late.isClosed }
        #expect(!socket.isClosed)
        #expect(await client.state == .connected)
        await client.stop()
    }

    /// Lost SYNs: while no attempt has opened, another starts every second (not the kernel's 1,
    /// 3, 7 s back-off, nor the transport's whole timeout); the first to open wins and the
    /// others, opening later, are closed.
    @Test func connectsAreStaggeredAndTheFirstToOpenWins() async throws {
        let (clock, transport) = (ManualClock(), ScriptedTransport())
        transport.holdsConnects = true
        let client = RelayClient(scriptedConfiguration(clock, transport))
        await client.start()
        try await until { transport.heldConnects == 1 && clock.deadlines == [.seconds(1)] }
        clock.advance(by: .seconds(1))
        try await until { transport.heldConnects == 2 && clock.deadlines == [.seconds(2)] }
        clock.advance(by: .seconds(1))
        try await until { transport.heldConnects == 3 }
        transport.release()
        try await until { await client.state == .connected }
        try await until { transport.connectionCount == 3 }
        let first = try await transport.waitForConnection(1)
        for n in 2...3 {
            let loser = try await transport.waitForConnection(n)
            try await until { loser.isClosed }
        }
        #expect(!first.isClosed)
        await client.stop()
    }

    /// A resume whose point was taken while the old socket still delivered: the relay sends
    /// again what came after that point, and what the client already showed is dropped.
    @Test func whatTheOldSocketDeliveredIsNotShownTwice() async throws {
        let (clock, transport) = (ManualClock(), ScriptedTransport())
        var settings = scriptedConfiguration(clock, transport)
        settings.recoverMissedEvents = true
        let client = RelayClient(settings)
        let events = client.subscribe()
        await client.start()
        let old = try await transport.waitForConnection(1)
        old.deliver(.text(#"{"type":"event","event":"device_status","data":{"online":true,"epoch":"E1","seq":0}}"#))
        for seq in 1...3 { old.deliver(.text(bark(seq))) }
        try await until { await client.resumePoint?.seq == 3 }
        await client.reconnectNow()
        let fresh = try await transport.waitForConnection(2)
        fresh.deliver(.text(#"{"type":"event","event":"device_status","data":{"online":true,"epoch":"E1","seq":5,"recovered":true}}"#))
        for seq in 2...5 { fresh.deliver(.text(bark(seq))) }
        try await until { await client.resumePoint?.seq == 5 }
        await client.stop()
        var seen: [Int] = []
        for await event in events {
            if case .event(let message) = event, let seq = try? JSON(parsing: message.raw)["seq"]?.intValue { seen.append(seq) }
        }
        #expect(seen == [1, 2, 3, 4, 5])
    }

    private func bark(_ seq: Int) -> String { #"{"seq":\#(seq),"type":"event","event":"bark_detected","data":{}}"# }

    /// Events every 250 ms on `socket`, the clock moved with them.
    private func stream(on socket: ScriptedConnection, _ clock: ManualClock, count: Int) async throws {
        for n in 1...count {
            clock.advance(by: .milliseconds(250))
            socket.deliver(.text(#"{"type":"event","event":"bark_detected","data":{"dog_id":"\#(n)"}}"#))
            try await until { clock.deadlines.contains(clock.now + .seconds(3)) || n < 3 }
        }
    }
}

/// `staggered` as the client's GETs run it (2 s apart, three at most), each attempt answered by hand.
private final class RequestRace: Sendable {
    let answers = (0..<3).map { _ in OneShot<Result<Int, any Error>>() }
    private let count = Locked(0)
    let result: Task<Result<Int, any Error>, Never>
    var started: Int { count.withLock { $0 } }

    init(_ clock: ManualClock) {
        let (answers, count) = (answers, count)
        result = Task {
            do {
                return .success(try await staggered(every: .seconds(2), attempts: 3, clock: clock.relayClientClock,
                                                    isFinal: RequestRetry.isFinal) {
                    let n = count.withLock { n -> Int in n += 1; return n - 1 }
                    return try await answers[n].value().get()
                })
            } catch {
                return .failure(error)
            }
        }
    }
}
