import Testing
@testable import RelayCore

/// The writer's framing (`SendQueue.writeFrames`) and the buffers it gives back (`PayloadPool`).
struct PayloadPoolTests {
    func queue() -> SendQueue { SendQueue(maxMessages: 100, maxBytes: 1 << 20) }

    /// A message as the pool receives it: bytes that live only for the copy.
    func payload(_ pool: PayloadPool, copying text: String, isBinary: Bool) -> Payload {
        Array(text.utf8).withUnsafeBytes { pool.payload(copying: $0, isBinary: isBinary) }
    }

    /// Frames as RFC 6455 server frames: FIN + opcode, unmasked length, the bytes; a numbered
    /// copy with `"seq":N,` after its `{`; as many as fit, the rest left queued.
    @Test func framesAreWrittenInOrderWhileTheyFit() {
        let pool = PayloadPool()
        var q = queue()
        let text = Payload(Array(#"{"a":1}"#.utf8))
        let binary = Payload([1, 2, 3], isBinary: true)
        _ = q.push(text)
        _ = q.push(binary)
        _ = q.push(text, numbering: Numbering.of(text, seq: 7))
        let buffer = UnsafeMutablePointer<UInt8>.allocate(capacity: 64)
        defer { buffer.deallocate() }
        let first = q.writeFrames(into: buffer, capacity: 14, recycling: pool)  // 9 + 5 bytes: two frames
        #expect(first == FramedBatch(length: 14, messages: 2, payloadBytes: 10))
        #expect(Array(UnsafeBufferPointer(start: buffer, count: 14)) == [0x81, 7] + Array(#"{"a":1}"#.utf8) + [0x82, 3, 1, 2, 3])
        let second = q.writeFrames(into: buffer, capacity: 64, recycling: pool)
        #expect(second.messages == 1 && q.isEmpty)
        #expect(Array(UnsafeBufferPointer(start: buffer, count: second.length)) == [0x81, 15] + Array(#"{"seq":7,"a":1}"#.utf8))
    }

    /// A buffer comes back only from its last holder, and the next message of its size class is
    /// copied into it; one still held elsewhere (a replay slot, another app) is left alone.
    @Test func onlyTheLastReferenceIsTakenBackAndReused() {
        let pool = PayloadPool()
        let buffer = UnsafeMutablePointer<UInt8>.allocate(capacity: 1024)
        defer { buffer.deallocate() }
        var q = queue()

        var kept: Payload? = payload(pool, copying: #"{"type":"event","event":"a"}"#, isBinary: false)
        _ = q.push(kept!)
        _ = q.writeFrames(into: buffer, capacity: 1024, recycling: pool)
        #expect(pool.kept == 0, "still held by `kept`")
        #expect(kept!.bytes == Array(#"{"type":"event","event":"a"}"#.utf8), "and untouched")

        let identity = ObjectIdentifier(kept!.storage)
        _ = q.push(kept!)
        kept = nil
        _ = q.writeFrames(into: buffer, capacity: 1024, recycling: pool)
        #expect(pool.kept == 1, "the queue held the last reference")

        let next = payload(pool, copying: #"{"b":2}"#, isBinary: true)
        #expect(ObjectIdentifier(next.storage) == identity && pool.kept == 0, "the same buffer, refilled")
        #expect(next.bytes == Array(#"{"b":2}"#.utf8) && next.isBinary && next.count == 7)
    }

    /// At a low rate a replayed event is last held by its device's replay slot (its apps wrote it
    /// long ago): the next event of that name hands the old buffer back to the hub's pool.
    @Test func aReplacedReplayEventGoesBackToThePool() {
        var limits = DeviceHub.Limits()
        limits.replayEvents = ["mission_progress"]
        let hub = DeviceHub(limits: limits, clock: ManualClock(wall: UnixTime(seconds: 100)).clock)
        let transport = RecordingTransport()
        func session(_ id: UInt64, _ role: Role) -> Session {
            let s = Session(id: id, role: role, deviceID: DeviceID("d1")!, tokenID: Int64(id), tokenExpiresAt: nil,
                            remoteAddress: "", connectedAt: .now(), now: 0, queue: queue())
            s.transport = transport
            hub.attach(s, now: 0, wallClock: UnixTime(seconds: 100))
            return s
        }
        let robot = session(1, .robot)
        let app = session(2, .app)
        let buffer = UnsafeMutablePointer<UInt8>.allocate(capacity: 4096)
        defer { buffer.deallocate() }
        func sendAndWrite(_ step: Int) {
            hub.receive(payload(hub.payloads, copying: #"{"type":"event","event":"mission_progress","data":{"step":\#(step)}}"#,
                                isBinary: false), from: robot, now: 0)
            while !app.queue.isEmpty { _ = app.queue.writeFrames(into: buffer, capacity: 4096, recycling: hub.payloads) }
        }
        sendAndWrite(1)
        #expect(hub.payloads.kept == 0, "the replay slot holds the first event")
        sendAndWrite(2)
        #expect(hub.payloads.kept == 1, "replaced: its buffer is back in the pool")
        sendAndWrite(3)
        #expect(hub.payloads.kept == 1, "the second's buffer came back, the first was reused for the third")
        withExtendedLifetime((robot, transport)) {}
    }

    /// Size classes: 64 << k bytes up to 4 KiB; larger messages are not pooled, and a buffer made
    /// to a message's exact size (not a class size) is not taken back.
    @Test func sizeClasses() {
        #expect(PayloadPool.sizeClass(0) == 0 && PayloadPool.sizeClass(64) == 0 && PayloadPool.sizeClass(65) == 1)
        #expect(PayloadPool.sizeClass(4096) == 6 && PayloadPool.sizeClass(4097) == nil)
        let pool = PayloadPool()
        var exact = Payload(Array(repeating: 0x20, count: 100))
        pool.recycle(&exact)
        #expect(pool.kept == 0)
        var large = payload(pool, copying: String(repeating: "x", count: 5000), isBinary: false)
        #expect(large.count == 5000)
        pool.recycle(&large)
        #expect(pool.kept == 0)
        var pooled = payload(pool, copying: String(repeating: "x", count: 100), isBinary: false)
        #expect(pooled.allocatedBytes == max(32, (PayloadStorage.elementOffset + 128 + 8 + 15) & ~15))
        pool.recycle(&pooled)
        #expect(pool.kept == 1)
    }
}

extension PayloadPool {
    /// Buffers kept, all classes.
    var kept: Int { (0..<PayloadPool.classCount).reduce(0) { $0 + counts[$1] } }
}
