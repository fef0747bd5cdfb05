import WimzProtocol

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// One message to deliver: its bytes and opcode. A robot event goes to N apps as N queue
/// entries sharing this one buffer (reference-counted by Swift, never copied per app).
///
/// One heap object per message: the count, the opcode and the bytes in one allocation
/// (`PayloadStorage`, tail-allocated), filled by one copy from lws's receive buffer. A class
/// holding a `[UInt8]` was two objects — two mallocs, two frees, a deinit chain and a generic
/// array copy per message: 327 instructions more of saturated fan-out under callgrind
/// (docs/performance.md, session 12). On
/// the forwarding path the objects come from, and go back to, a `PayloadPool`.
///
/// Sendable: a storage is written only while nothing else refers to it (when it is made, and
/// by its pool once it came back), and only read while it is shared.
public struct Payload: @unchecked Sendable {
    @usableFromInline var storage: PayloadStorage

    /// A copy of `bytes`.
    public init(_ bytes: UnsafeRawBufferPointer, isBinary: Bool = false) {
        storage = PayloadStorage.make(capacity: bytes.count)
        storage.fill(bytes, isBinary: isBinary)
    }

    /// A copy of `bytes`.
    public init(_ bytes: [UInt8], isBinary: Bool = false) {
        self = bytes.withUnsafeBytes { Payload($0, isBinary: isBinary) }
    }

    public init(json: JSONValue) { self.init(json.encodedBytes) }

    init(storage: PayloadStorage) { self.storage = storage }

    /// Bytes on the wire (before framing).
    @inlinable public var count: Int { storage.header.count }
    @inlinable public var isBinary: Bool { storage.header.isBinary }

    /// The bytes, for as long as `body` runs (no copy). Inlinable, so that callers in other
    /// modules get it specialized (a generic call costs ~80 instructions a message).
    @inlinable
    public func withBytes<R>(_ body: (UnsafeBufferPointer<UInt8>) throws -> R) rethrows -> R {
        // The caller's payload, borrowed for the call, holds the storage: no retain and release
        // of it (which `withUnsafeMutablePointerToElements` pays, ~40 instructions a call, and
        // a message has several).
        try body(UnsafeBufferPointer(start: storage.elements.assumingMemoryBound(to: UInt8.self), count: storage.header.count))
    }

    /// A copy of the bytes (off the forwarding path: tests, the push logic, hand-offs).
    public var bytes: [UInt8] { withBytes { Array($0) } }

    /// The same message (one buffer), not just equal bytes.
    public static func === (a: Payload, b: Payload) -> Bool { a.storage === b.storage }

    /// What the message occupies on the heap: the object as Swift asks malloc for it (object
    /// header, `PayloadStorage.Header`, the capacity) as malloc rounds it (8 bytes of its own,
    /// 16-byte steps, 32 at the least).
    public var allocatedBytes: Int { max(32, (PayloadStorage.elementOffset + storage.header.capacity + 8 + 15) & ~15) }
}

/// The heap object behind a `Payload`: its header, then the bytes.
@usableFromInline
final class PayloadStorage: ManagedBuffer<PayloadStorage.Header, UInt8> {
    @usableFromInline
    struct Header {
        @usableFromInline var count: Int
        /// Bytes it has room for (a pool's size class, or exactly the message).
        @usableFromInline let capacity: Int
        @usableFromInline var isBinary: Bool
    }

    /// Where the bytes begin: after Swift's object header (16 bytes) and `Header` (the bytes
    /// need no alignment).
    @usableFromInline static var elementOffset: Int { 16 + MemoryLayout<Header>.size }

    /// The first byte, found from the object's address (what `withUnsafeMutablePointerToElements`
    /// computes, without its retain and release; `make` checks the two agree).
    @inlinable var elements: UnsafeMutableRawPointer { Unmanaged.passUnretained(self).toOpaque() + PayloadStorage.elementOffset }

    static func make(capacity: Int) -> PayloadStorage {
        let buffer = create(minimumCapacity: capacity) { _ in Header(count: 0, capacity: capacity, isBinary: false) }
        let storage = unsafeDowncast(buffer, to: PayloadStorage.self)
        assert(storage.withUnsafeMutablePointerToElements { UnsafeMutableRawPointer($0) } == storage.elements, "element offset")
        return storage
    }

    /// Writes the message (`bytes.count` ≤ capacity). Only while nothing else refers to it.
    func fill(_ bytes: UnsafeRawBufferPointer, isBinary: Bool) {
        header.count = bytes.count
        header.isBinary = isBinary
        if let source = bytes.baseAddress, bytes.count > 0 {
            elements.copyMemory(from: source, byteCount: bytes.count)
        }
    }
}

/// Message buffers for reuse on the service thread: what the receive path copies a message into,
/// and where the writer and the replay slots give back a buffer they held the last reference to
/// — so forwarding a message costs no malloc and no free once the pool has its size (net −110
/// instructions a message of saturated fan-out under callgrind, docs/performance.md session 12).
/// A buffer still held elsewhere (a replay slot, a history, another app's queue) is never taken
/// back: `isKnownUniquelyReferenced` decides.
///
/// Size classes of 64 << k bytes up to 4 KiB (larger messages are allocated as they come and
/// freed); each class keeps at most 8,192 buffers or 4 MiB — enough for saturated fan-out's
/// ~6,400 messages in flight — so a relay holds at most ~20 MiB of them after a burst.
public final class PayloadPool {
    static let smallest = 64
    static let classCount = 7
    /// Per class, a stack of kept buffers (each held by one retained reference) and its size:
    /// plain memory, so a push or pop has no array to check for uniqueness.
    private let stacks: [UnsafeMutablePointer<Unmanaged<PayloadStorage>>]
    /// Buffers kept per class (internal: the pool's tests read them).
    let counts = UnsafeMutablePointer<Int>.allocate(capacity: PayloadPool.classCount)
    private let keep: [Int] = (0..<PayloadPool.classCount).map { min(8192, (4 << 20) / (PayloadPool.smallest << $0)) }

    public init() {
        stacks = keep.map { UnsafeMutablePointer<Unmanaged<PayloadStorage>>.allocate(capacity: $0) }
        counts.initialize(repeating: 0, count: PayloadPool.classCount)
    }

    deinit {
        for k in 0..<PayloadPool.classCount {
            for i in 0..<counts[k] { stacks[k][i].release() }
            stacks[k].deallocate()
        }
        counts.deallocate()
    }

    /// The size class of a message of `count` bytes (nil: too large to pool).
    @inline(__always)
    static func sizeClass(_ count: Int) -> Int? {
        if count <= smallest { return 0 }
        let k = Int.bitWidth - (count - 1).leadingZeroBitCount - 6
        return k < classCount ? k : nil
    }

    /// A copy of `bytes`, in a kept buffer when one of its class is free.
    public func payload(copying bytes: UnsafeRawBufferPointer, isBinary: Bool) -> Payload {
        guard let k = PayloadPool.sizeClass(bytes.count) else { return Payload(bytes, isBinary: isBinary) }
        let storage: PayloadStorage
        if counts[k] > 0 {
            counts[k] -= 1
            storage = stacks[k][counts[k]].takeRetainedValue()
        } else {
            storage = PayloadStorage.make(capacity: PayloadPool.smallest << k)
        }
        storage.fill(bytes, isBinary: isBinary)
        return Payload(storage: storage)
    }

    /// Takes `payload`'s buffer back if this was its last reference and it is of a class size.
    func recycle(_ payload: inout Payload) {
        guard isKnownUniquelyReferenced(&payload.storage) else { return }
        let capacity = payload.storage.header.capacity
        guard let k = PayloadPool.sizeClass(capacity), PayloadPool.smallest << k == capacity, counts[k] < keep[k] else { return }
        stacks[k][counts[k]] = .passRetained(payload.storage)
        counts[k] += 1
    }
}

/// Where a recovering app's copy of a message gets its number (docs/protocol.md v1.1): `"seq":N`
/// (and a comma unless the object is empty) right after the opening `{` at `at - 1`. The
/// writer puts it in while it frames the message, so the one buffer is still shared and a
/// numbered delivery allocates nothing.
public struct Numbering: Sendable, Equatable {
    public let seq: UInt64
    /// Index just after the message's opening `{`.
    public let at: Int
    public let comma: Bool
    /// Bytes the insertion adds: `"seq":` (6), the digits, the comma (computed once: the writer
    /// and the queue's byte count read it per message).
    public let insertionCount: Int

    init(seq: UInt64, at: Int, comma: Bool) {
        self.seq = seq
        self.at = at
        self.comma = comma
        var digits = 1
        var n = seq
        while n >= 10 { n /= 10; digits += 1 }
        insertionCount = 6 + digits + (comma ? 1 : 0)
    }

    /// Where `payload` (a JSON object, possibly after white space) takes its number; nil for
    /// anything else (sent unnumbered).
    public static func of(_ payload: Payload, seq: UInt64) -> Numbering? {
        payload.withBytes { of($0, seq: seq) }
    }

    static func of(_ bytes: UnsafeBufferPointer<UInt8>, seq: UInt64) -> Numbering? {
        firstMemberSlot(bytes).map { Numbering(seq: seq, at: $0.at, comma: $0.comma) }
    }

    /// Where a member goes in first in the JSON object `bytes` (possibly after white space): the
    /// index just after its `{`, and whether a comma must follow (the object is not empty). Nil
    /// for anything but an object. The relay's `seq` and `from` are both inserted there.
    public static func firstMemberSlot(_ bytes: UnsafeBufferPointer<UInt8>) -> (at: Int, comma: Bool)? {
        var i = 0
        while i < bytes.count, bytes[i] == 0x20 || bytes[i] == 0x09 || bytes[i] == 0x0A || bytes[i] == 0x0D { i += 1 }
        guard i < bytes.count, bytes[i] == UInt8(ascii: "{") else { return nil }
        var j = i + 1
        while j < bytes.count, bytes[j] == 0x20 || bytes[j] == 0x09 || bytes[j] == 0x0A || bytes[j] == 0x0D { j += 1 }
        return (i + 1, !(j < bytes.count && bytes[j] == UInt8(ascii: "}")))
    }

    /// Writes the insertion at `p` (room for `insertionCount` bytes).
    public func writeInsertion(to p: UnsafeMutablePointer<UInt8>) {
        for (k, c) in #""seq":"#.utf8.enumerated() { p[k] = c }
        let count = insertionCount
        var n = seq
        var k = count - (comma ? 2 : 1)
        repeat {
            p[k] = UInt8(48 + n % 10)
            n /= 10
            k -= 1
        } while n > 0
        if comma { p[count - 1] = UInt8(ascii: ",") }
    }

    /// The whole numbered message (one allocation: for tests and hand-written checks).
    public func rendered(_ payload: Payload) -> [UInt8] {
        let insertion = [UInt8](unsafeUninitializedCapacity: insertionCount) { buffer, count in
            writeInsertion(to: buffer.baseAddress!)
            count = insertionCount
        }
        let bytes = payload.bytes
        return Array(bytes[..<at]) + insertion + Array(bytes[at...])
    }
}

/// What `SendQueue.writeFrames` wrote: bytes of frames, and the messages and payload bytes in them.
public struct FramedBatch: Sendable, Equatable {
    public var length = 0
    public var messages = 0
    public var payloadBytes = 0
    public init(length: Int = 0, messages: Int = 0, payloadBytes: Int = 0) {
        self.length = length
        self.messages = messages
        self.payloadBytes = payloadBytes
    }
}

/// One queued message: the shared buffer, and for a recovering app where its number goes.
public struct QueuedMessage: Sendable {
    public internal(set) var payload: Payload
    public let numbering: Numbering?
    /// Bytes on the wire (before framing).
    public var count: Int { payload.count + (numbering?.insertionCount ?? 0) }
}

/// A bounded FIFO of messages (per socket). Bounded by count and by bytes; `push` refuses
/// rather than grow past either, and the caller treats that as a slow consumer.
///
/// A ring of slots (a power of two, grown by doubling): a message in and out costs two slot
/// writes, where an array with a moving head paid for compacting it (~160 instructions a
/// message under callgrind, when the queue emptied after each write). A large ring is let go
/// once the queue is empty, so a socket that once had a burst does not keep its slots.
public struct SendQueue: Sendable {
    public let maxMessages: Int
    public let maxBytes: Int
    private var slots: ContiguousArray<QueuedMessage?> = []
    private var head = 0
    public private(set) var count = 0
    public private(set) var bytes = 0
    /// Slots kept when the queue empties; a larger ring is given back.
    private static let keptSlots = 64

    public init(maxMessages: Int, maxBytes: Int) {
        self.maxMessages = maxMessages
        self.maxBytes = maxBytes
    }

    public var isEmpty: Bool { count == 0 }

    /// False (and nothing queued) when the message would exceed a bound. A single message
    /// larger than `maxBytes` is accepted into an empty queue, so big messages still flow.
    public mutating func push(_ payload: Payload, numbering: Numbering? = nil) -> Bool {
        let size = payload.count + (numbering?.insertionCount ?? 0)
        guard fits(size) else { return false }
        if count == slots.count { grow() }
        // Made in its slot: a local message first cost a second retain and a release per push.
        slots[(head + count) & (slots.count - 1)] = QueuedMessage(payload: payload, numbering: numbering)
        count += 1
        bytes += size
        return true
    }

    /// Whether a message of `size` bytes would be accepted now.
    public func fits(_ size: Int) -> Bool { count < maxMessages && (bytes + size <= maxBytes || isEmpty) }

    /// The next message's size on the wire (nil when the queue is empty), read in place.
    public var firstCount: Int? { isEmpty ? nil : slots[head]?.count }

    /// The next message's shared buffer (unnumbered).
    public var first: Payload? { isEmpty ? nil : slots[head]?.payload }

    /// Takes the next message out of its slot (moved: the writer's release is the queue's last).
    public mutating func takeFirst() -> QueuedMessage? {
        guard !isEmpty, let message = slots[head].take() else { return nil }
        bytes -= message.count
        head = (head + 1) & (slots.count - 1)
        count -= 1
        if count == 0 {
            head = 0
            if slots.count > SendQueue.keptSlots { slots = [] }
        }
        return message
    }

    /// The next message as the app gets it (a numbered one rendered into a new buffer), removed.
    public mutating func popFirst() -> Payload? {
        guard let message = takeFirst() else { return nil }
        guard let numbering = message.numbering else { return message.payload }
        return Payload(numbering.rendered(message.payload), isBinary: message.payload.isBinary)
    }

    /// Writes queued messages into `buffer` as RFC 6455 server frames (unmasked, one frame each;
    /// a recovering app's copy with its number put in), in order and while they fit in
    /// `capacity` bytes, and removes them. Pure, so the writer's framing is tested without a socket.
    /// Buffers written for the last time go back to `pool`.
    public mutating func writeFrames(into buffer: UnsafeMutablePointer<UInt8>, capacity: Int, recycling pool: PayloadPool) -> FramedBatch {
        var batch = FramedBatch()
        while let size = firstCount {
            let header = WebSocketFrame.headerSize(payloadLength: size)
            guard batch.length + header + size <= capacity, var message = takeFirst() else { break }
            let p = buffer + batch.length + WebSocketFrame.writeHeader(
                opcode: message.payload.isBinary ? WebSocketFrame.binary : WebSocketFrame.text, payloadLength: size,
                to: buffer + batch.length)
            message.payload.withBytes { source in
                guard let base = source.baseAddress else { return }
                if let numbering = message.numbering {
                    p.update(from: base, count: numbering.at)
                    numbering.writeInsertion(to: p + numbering.at)
                    (p + numbering.at + numbering.insertionCount).update(from: base + numbering.at, count: source.count - numbering.at)
                } else {
                    p.update(from: base, count: size)
                }
            }
            batch.length += header + size
            batch.messages += 1
            batch.payloadBytes += size
            pool.recycle(&message.payload)
        }
        return batch
    }

    public mutating func removeAll() {
        slots = []
        head = 0
        count = 0
        bytes = 0
    }

    /// Doubles the ring (at least 4 slots), the queued messages moved to its start in order.
    private mutating func grow() {
        // Filled in one pass (`init(repeating:count:)` copied its nil element out of line per slot).
        let size = max(4, slots.count * 2)
        var larger = ContiguousArray<QueuedMessage?>(unsafeUninitializedCapacity: size) { slots, initialized in
            slots.initialize(repeating: nil)
            initialized = size
        }
        for k in 0..<count { larger[k] = slots[(head + k) & (slots.count - 1)] }
        slots = larger
        head = 0
    }
}
