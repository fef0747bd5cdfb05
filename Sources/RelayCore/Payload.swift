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
public struct SendQueue: Sendable {
    public let maxMessages: Int
    public let maxBytes: Int
    private var items: [QueuedMessage] = []
    private var head = 0
    public private(set) var bytes = 0

    public init(maxMessages: Int, maxBytes: Int) {
        self.maxMessages = maxMessages
        self.maxBytes = maxBytes
    }

    public var count: Int { items.count - head }
    public var isEmpty: Bool { head == items.count }

    /// False (and nothing queued) when the message would exceed a bound. A single message
    /// larger than `maxBytes` is accepted into an empty queue, so big messages still flow.
    public mutating func push(_ payload: Payload, numbering: Numbering? = nil) -> Bool {
        let message = QueuedMessage(payload: payload, numbering: numbering)
        guard fits(message.count) else { return false }
        items.append(message)
        bytes += message.count
        return true
    }

    /// Whether a message of `size` bytes would be accepted now.
    public func fits(_ size: Int) -> Bool { count < maxMessages && (bytes + size <= maxBytes || isEmpty) }

    /// The next message to write.
    public var firstMessage: QueuedMessage? { isEmpty ? nil : items[head] }

    /// The next message's shared buffer (unnumbered).
    public var first: Payload? { firstMessage?.payload }

    /// Drops the next message (written).
    public mutating func dropFirst() {
        guard !isEmpty else { return }
        bytes -= items[head].count
        head += 1
        if head == items.count {
            items.removeAll(keepingCapacity: items.count <= 64)
            head = 0
        } else if head >= 64, head * 2 >= items.count {
            items.removeFirst(head)
            head = 0
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
        items.removeAll()
        head = 0
        bytes = 0
    }
}
