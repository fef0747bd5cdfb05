/// One message to deliver: its bytes and opcode. A robot event goes to N apps as N queue
/// entries sharing this one buffer (reference-counted by Swift, never copied per app).
public final class Payload: Sendable {
    public let bytes: [UInt8]
    public let isBinary: Bool

    public init(_ bytes: [UInt8], isBinary: Bool = false) {
        self.bytes = bytes
        self.isBinary = isBinary
    }

    public convenience init(json: JSONValue) { self.init(json.encodedBytes) }
}

/// Where a recovering app's copy of a message gets its number (PROTOCOL.md v1.1): `"seq":N`
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
        let bytes = payload.bytes
        var i = 0
        while i < bytes.count, bytes[i] == 0x20 || bytes[i] == 0x09 || bytes[i] == 0x0A || bytes[i] == 0x0D { i += 1 }
        guard i < bytes.count, bytes[i] == UInt8(ascii: "{") else { return nil }
        var j = i + 1
        while j < bytes.count, bytes[j] == 0x20 || bytes[j] == 0x09 || bytes[j] == 0x0A || bytes[j] == 0x0D { j += 1 }
        return Numbering(seq: seq, at: i + 1, comma: !(j < bytes.count && bytes[j] == UInt8(ascii: "}")))
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
        return Array(payload.bytes[..<at]) + insertion + Array(payload.bytes[at...])
    }
}

/// One queued message: the shared buffer, and for a recovering app where its number goes.
public struct QueuedMessage: Sendable {
    public let payload: Payload
    public let numbering: Numbering?
    /// Bytes on the wire (before framing).
    public var count: Int { payload.bytes.count + (numbering?.insertionCount ?? 0) }
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
        let message = QueuedMessage(payload: payload, numbering: numbering)
        guard fits(message.count) else { return false }
        if count == slots.count { grow() }
        slots[(head + count) & (slots.count - 1)] = message
        count += 1
        bytes += message.count
        return true
    }

    /// Whether a message of `size` bytes would be accepted now.
    public func fits(_ size: Int) -> Bool { count < maxMessages && (bytes + size <= maxBytes || isEmpty) }

    /// The next message to write.
    public var firstMessage: QueuedMessage? { isEmpty ? nil : slots[head] }

    /// The next message's shared buffer (unnumbered).
    public var first: Payload? { firstMessage?.payload }

    /// Drops the next message (written).
    public mutating func dropFirst() {
        guard let message = firstMessage else { return }
        bytes -= message.count
        slots[head] = nil
        head = (head + 1) & (slots.count - 1)
        count -= 1
        if count == 0 {
            head = 0
            if slots.count > SendQueue.keptSlots { slots = [] }
        }
    }

    /// The next message as the app gets it (a numbered one rendered into a new buffer), removed.
    public mutating func popFirst() -> Payload? {
        guard let message = firstMessage else { return nil }
        dropFirst()
        guard let numbering = message.numbering else { return message.payload }
        return Payload(numbering.rendered(message.payload), isBinary: message.payload.isBinary)
    }

    public mutating func removeAll() {
        slots = []
        head = 0
        count = 0
        bytes = 0
    }

    /// Doubles the ring (at least 4 slots), the queued messages moved to its start in order.
    private mutating func grow() {
        var larger = ContiguousArray<QueuedMessage?>(repeating: nil, count: max(4, slots.count * 2))
        for k in 0..<count { larger[k] = slots[(head + k) & (slots.count - 1)] }
        slots = larger
        head = 0
    }
}
