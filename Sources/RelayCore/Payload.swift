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

/// A bounded FIFO of payloads (per socket). Bounded by count and by bytes; `push` refuses
/// rather than grow past either, and the caller treats that as a slow consumer.
public struct SendQueue: Sendable {
    public let maxMessages: Int
    public let maxBytes: Int
    private var items: [Payload] = []
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
    public mutating func push(_ payload: Payload) -> Bool {
        guard fits(payload.bytes.count) else { return false }
        items.append(payload)
        bytes += payload.bytes.count
        return true
    }

    /// Whether a message of `size` bytes would be accepted now.
    public func fits(_ size: Int) -> Bool { count < maxMessages && (bytes + size <= maxBytes || isEmpty) }

    public var first: Payload? { isEmpty ? nil : items[head] }

    public mutating func popFirst() -> Payload? {
        guard !isEmpty else { return nil }
        let p = items[head]
        head += 1
        bytes -= p.bytes.count
        if head == items.count {
            items.removeAll(keepingCapacity: items.count <= 64)
            head = 0
        } else if head >= 64, head * 2 >= items.count {
            items.removeFirst(head)
            head = 0
        }
        return p
    }

    public mutating func removeAll() {
        items.removeAll()
        head = 0
        bytes = 0
    }
}
