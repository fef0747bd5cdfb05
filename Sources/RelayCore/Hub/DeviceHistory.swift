/// Missed-event recovery (docs/protocol.md v1.1 "Recovering missed events"): one device's numbered history of
/// the robot's broadcasts, for apps that connect with `recover=1` and resume with `since=E:N`.
///
/// Wire format: to a recovering app each such message arrives with `"seq":N` inserted as its
/// first member, the rest byte for byte — `{"seq":17,"type":"event","event":"bark_detected",…}`;
/// `device_status.data` carries `"epoch":E,"seq":LAST` (and `"recovered":BOOL` on a resume).
/// N counts up by one per device within epoch E; E changes whenever the numbering restarts (a new
/// history: a relay restart or crash, or a device this node never saw).
///
/// Bounded by count and age (`Limits`), and by the node's memory budget (`HistoryMemory`: the
/// hub drops the oldest messages of the least recently resumed devices past it): a resume is
/// recovered only if every message after N is still held. Entries keep the message as the robot
/// sent it (a reference to its one buffer: no copy); the ring grows by doubling up to
/// `maxMessages` and is freed when emptied, so holding history costs no allocation per message
/// once the ring has its size. Every message entering or leaving, and the ring itself, is counted
/// in `HistoryMemory.used`, which the caller passes in.
public final class DeviceHistory {
    public struct Limits: Sendable, Equatable {
        public var maxMessages = 256
        /// Nanoseconds.
        public var maxAge: UInt64 = 120_000_000_000
        public init() {}
    }

    private struct Entry {
        let seq: UInt64
        let at: UInt64
        let payload: Payload
    }

    public let epoch: String
    public let limits: Limits
    /// The newest number handed out (0: none yet).
    public private(set) var lastSeq: UInt64
    /// A ring of the newest messages, `count` of them from `start` (the oldest).
    private var ring: [Entry?] = []
    private var start = 0
    public private(set) var count = 0
    /// What the held messages cost, as `HistoryMemory` counts it.
    public private(set) var bytes = 0
    /// Listed in the hub's order of resumes (`HistoryMemory.order`).
    var isListed = false

    public init(epoch: String, lastSeq: UInt64 = 0, limits: Limits) {
        self.epoch = epoch
        self.lastSeq = lastSeq
        self.limits = limits
    }

    /// A fresh epoch: 12 random base-36 characters (no other meaning).
    public static func newEpoch() -> String {
        var generator = SystemRandomNumberGenerator()
        let alphabet = Array("0123456789abcdefghijklmnopqrstuvwxyz".utf8)
        return String(decoding: (0..<12).map { _ in alphabet[Int(generator.next(upperBound: UInt64(alphabet.count)))] },
                      as: UTF8.self)
    }

    /// What one held message costs besides its ring slot: its one heap object as malloc holds it
    /// (`Payload.allocatedBytes`; `wimz-bench history-memory` compares the count with the
    /// resident size, docs/performance.md).
    static func cost(_ payload: Payload) -> Int { payload.allocatedBytes }
    /// One ring slot.
    static let slotBytes = MemoryLayout<Entry?>.stride

    /// Numbers and keeps `payload` (the next seq); returns its number. `used` is the node's
    /// count of history bytes.
    @discardableResult
    public func append(_ payload: Payload, now: UInt64, used: inout Int) -> UInt64 {
        lastSeq += 1
        if count == ring.count {
            if ring.count < limits.maxMessages { grow(used: &used) } else { dropOldest(used: &used) }
        }
        let cost = DeviceHistory.cost(payload)
        ring[(start + count) % ring.count] = Entry(seq: lastSeq, at: now, payload: payload)
        count += 1
        bytes += cost
        used += cost
        return lastSeq
    }

    /// Twice the room (at most `maxMessages`), the held messages first.
    private func grow(used: inout Int) {
        let capacity = min(max(ring.count * 2, 8), max(limits.maxMessages, 1))
        var grown = [Entry?](repeating: nil, count: capacity)
        for k in 0..<count { grown[k] = ring[(start + k) % ring.count] }
        let added = (capacity - ring.count) * DeviceHistory.slotBytes
        ring = grown
        start = 0
        bytes += added
        used += added
    }

    /// Drops the oldest held message (a resume after it then gets `recovered:false`); the ring
    /// goes with the last one.
    public func dropOldest(used: inout Int) {
        guard count > 0, let entry = ring[start] else { return }
        let cost = DeviceHistory.cost(entry.payload)
        ring[start] = nil
        start = (start + 1) % ring.count
        count -= 1
        bytes -= cost
        used -= cost
        if count == 0 {
            let freed = ring.count * DeviceHistory.slotBytes
            ring = []
            start = 0
            bytes -= freed
            used -= freed
        }
    }

    /// Drops what is older than `maxAge` (no resume can use it); returns how many.
    @discardableResult
    public func dropExpired(now: UInt64, used: inout Int) -> Int {
        var dropped = 0
        while count > 0, let oldest = ring[start], now > oldest.at, now - oldest.at > limits.maxAge {
            dropOldest(used: &used)
            dropped += 1
        }
        return dropped
    }

    /// Drops everything held (the device goes).
    public func clear(used: inout Int) {
        while count > 0 { dropOldest(used: &used) }
    }

    private func entry(_ k: Int) -> Entry { ring[(start + k) % ring.count]! }

    /// Every held message after `seq`, oldest first; nil when some of them are no longer held
    /// (dropped by count, age or the memory budget) or `seq` is ahead of this history.
    public func messages(after seq: UInt64, now: UInt64) -> [(seq: UInt64, payload: Payload)]? {
        guard seq <= lastSeq else { return nil }
        if seq == lastSeq { return [] }
        var out: [(seq: UInt64, payload: Payload)] = []
        out.reserveCapacity(Int(min(lastSeq - seq, UInt64(count))))
        for k in 0..<count {
            let entry = entry(k)
            guard entry.seq > seq else { continue }
            if out.isEmpty, entry.seq != seq + 1 { return nil }  // the next one was dropped
            if now > entry.at, now - entry.at > limits.maxAge { return nil }
            out.append((entry.seq, entry.payload))
        }
        return out.count == Int(lastSeq - seq) ? out : nil
    }

    /// The held messages with their age, oldest first (what a hand-off carries).
    public func snapshot(now: UInt64) -> [(seq: UInt64, ageNanos: UInt64, bytes: [UInt8])] {
        (0..<count).map { k in
            let entry = entry(k)
            return (entry.seq, now > entry.at ? now - entry.at : 0, entry.payload.bytes)
        }
    }

    /// Rebuilds a history handed over by another node (entries oldest first, ages as carried).
    public static func restore(epoch: String, lastSeq: UInt64, entries: [(seq: UInt64, ageNanos: UInt64, bytes: [UInt8])],
                               limits: Limits, now: UInt64, used: inout Int) -> DeviceHistory {
        let history = DeviceHistory(epoch: epoch, lastSeq: 0, limits: limits)
        for entry in entries.suffix(limits.maxMessages) {
            history.lastSeq = entry.seq - 1
            history.append(Payload(entry.bytes), now: now > entry.ageNanos ? now - entry.ageNanos : 0, used: &used)
        }
        history.lastSeq = lastSeq
        return history
    }

    /// `payload` as a recovering app gets it: `"seq":N` inserted as the first member. Nil for
    /// anything but a JSON object (those go unnumbered, as they are). Allocates: the relay
    /// itself numbers while writing (`Numbering`); this is for checks and tests.
    public static func numbered(_ payload: Payload, seq: UInt64) -> Payload? {
        Numbering.of(payload, seq: seq).map { Payload($0.rendered(payload)) }
    }
}

/// What an app asked for on connect (`recover=1`, `since=E:N`).
public enum RecoveryRequest: Sendable, Equatable {
    /// Numbered messages from now on.
    case fresh
    /// Numbered messages, starting with every one after `seq` of `epoch`.
    case resume(epoch: String, seq: UInt64)

    /// Reads the query arguments: nil when the app asked for neither (v1 behaviour); throws for
    /// a malformed `since` or `recover`.
    public static func parse(recover: String?, since: String?) throws(RelayError) -> RecoveryRequest? {
        if let since {
            let parts = since.split(separator: ":", omittingEmptySubsequences: false)
            guard parts.count == 2, (1...32).contains(parts[0].count),
                  parts[0].utf8.allSatisfy({ ($0 >= 0x30 && $0 <= 0x39) || ($0 >= 0x61 && $0 <= 0x7A) || ($0 >= 0x41 && $0 <= 0x5A) || $0 == 0x2D || $0 == 0x5F }),
                  let seq = UInt64(parts[1]) else {
                throw RelayError(.badRequest, "since must be EPOCH:SEQ as device_status reported them")
            }
            return .resume(epoch: String(parts[0]), seq: seq)
        }
        switch recover {
        case nil, "0": return nil
        case "1": return .fresh
        default: throw RelayError(.badRequest, "recover must be 1")
        }
    }
}
