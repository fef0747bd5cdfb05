import Foundation
import MallocCounter
import Testing
@testable import RelayCore

/// Issue 6 §3: forwarding one robot event to N apps shares one buffer, so the heap allocations
/// per forwarded message must not grow with N. Counted with a pass-through malloc (the
/// MallocCounter target) around the hub's routing and the apps' queue draining, which is what
/// the service thread does per message apart from the one receive buffer and `Payload`.
@Suite(.disabled(if: ProcessInfo.processInfo.environment["WIMZ_SKIP_ALLOCATION_TEST"] != nil,
                 "under the thread sanitizer, whose allocator replaces the counting malloc"))
struct AllocationTests {
    /// Allocations per message for a robot event routed to `apps` apps and drained from their queues.
    /// `historyKept`: a recovering app connected once and left, so the device keeps numbering its
    /// history (docs/protocol.md v1.1) while only v1 apps listen.
    func allocationsPerMessage(apps appCount: Int, messages: Int = 200, historyKept: Bool = false) -> Double {
        var limits = DeviceHub.Limits()
        limits.replayEvents = ["mode_changed", "mission_progress"]
        let hub = DeviceHub(limits: limits, clock: ManualClock(wall: UnixTime(seconds: 100)).clock)
        func session(_ id: UInt64, _ role: Role) -> Session {
            Session(id: id, role: role, deviceID: DeviceID("d1")!, tokenID: Int64(id), tokenExpiresAt: nil,
                    remoteAddress: "127.0.0.1", connectedAt: .now(), now: 0,
                    queue: SendQueue(maxMessages: 1024, maxBytes: 1 << 20))
        }
        let transport = RecordingTransport()
        let robot = session(1, .robot)
        robot.transport = transport
        hub.attach(robot, now: 0, wallClock: UnixTime(seconds: 100))
        if historyKept {
            let recovering = session(1000, .app)
            recovering.transport = transport
            recovering.recovery = .fresh
            hub.attach(recovering, now: 0, wallClock: UnixTime(seconds: 100))
            hub.detach(recovering)
        }
        let apps = (0..<appCount).map { i -> Session in
            let app = session(UInt64(2 + i), .app)
            app.transport = transport
            hub.attach(app, now: 0, wallClock: UnixTime(seconds: 100))
            return app
        }
        // Warm-up: queues reach their steady capacity, and a kept history's ring its full size
        // (it grows by doubling up to `maxMessages`).
        let warmUp = historyKept ? limits.history.maxMessages + 10 : 10
        // Payloads are made before counting: each is the one receive buffer of its message.
        let events = (0..<(messages + warmUp)).map { i in
            Payload(Array(#"{"type":"event","event":"mission_progress","data":{"step":\#(i)}}"#.utf8))
        }
        // Index loops: this test module is built without optimisation, where a for-in over an
        // array of objects allocates per element and would be counted against the relay.
        func drainApps() {
            var i = 0
            while i < apps.count {
                while apps[i].queue.popFirst() != nil {}
                i += 1
            }
        }
        func forward(_ from: Int, _ to: Int) {
            var m = from
            while m < to {
                hub.receive(events[m], from: robot, now: 0)
                drainApps()
                m += 1
            }
        }
        drainApps()
        while robot.queue.popFirst() != nil {}
        forward(0, warmUp)
        let before = malloc_counter_thread_allocations()
        forward(warmUp, warmUp + messages)
        let after = malloc_counter_thread_allocations()
        return Double(after - before) / Double(messages)
    }

    @Test func allocationsPerForwardedMessageDoNotGrowWithTheNumberOfApps() {
        let one = allocationsPerMessage(apps: 1)
        let sixteen = allocationsPerMessage(apps: 16)
        let many = allocationsPerMessage(apps: 64)
        #expect(one == sixteen && sixteen == many, "allocations per message: 1 app \(one), 16 apps \(sixteen), 64 apps \(many)")
        #expect(one <= 1, "allocations per message with one app: \(one)")
    }

    /// Apps that don't ask for recovery cost nothing more when the device keeps a history: once
    /// the ring has its size it holds a reference to the message's one buffer.
    @Test func keepingTheRecoveryHistoryAddsNoAllocationForV1Apps() {
        let plain = allocationsPerMessage(apps: 4, messages: 400)
        let withHistory = allocationsPerMessage(apps: 4, messages: 400, historyKept: true)
        #expect(withHistory == plain, "allocations per message: \(plain) without history, \(withHistory) with")
    }

    /// What the history budget counts per message is what malloc holds for it: the chunk glibc
    /// cuts for the size Swift asks (the request plus malloc's own 8 bytes, in 16-byte steps, 32
    /// at the least), for every size up to past a 16-byte step or two. (The usable size is not
    /// the yardstick: glibc hands out a free chunk up to 16 bytes larger rather than split it,
    /// depending on what the heap — other tests' threads included — freed before.)
    @Test func aPayloadsCountedSizeIsWhatMallocHolds() {
        for size in 0...300 {
            let bytes = [UInt8](repeating: 0x61, count: size)
            let payload = Payload(bytes)
            let requested = Int(malloc_counter_last_request())
            let chunk = max(32, (requested + 8 + 15) & ~15)
            #expect(requested == PayloadStorage.elementOffset + size, "\(size) bytes: Swift asked malloc for \(requested)")
            #expect(payload.allocatedBytes == chunk, "\(size) bytes: counted \(payload.allocatedBytes), malloc's chunk \(chunk)")
            let usable = Int(malloc_counter_glibc_usable_size(requested))
            #expect(usable + 8 >= chunk, "\(size) bytes: glibc's usable size \(usable)")
        }
    }

    /// The counter itself works: a fresh array of N buffers is N + 1 allocations.
    @Test func counterSeesAllocations() {
        let before = malloc_counter_thread_allocations()
        let buffers = (0..<10).map { i in [UInt8](repeating: UInt8(i), count: 100 + i) }
        let after = malloc_counter_thread_allocations()
        #expect(buffers.count == 10 && after - before >= 10)
    }
}
