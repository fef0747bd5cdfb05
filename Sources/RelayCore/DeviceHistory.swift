/// Missed-event recovery (PROTOCOL.md v1.1 "Missed events"): one device's numbered history of
/// the robot's broadcasts, for apps that connect with `recover=1` and resume with `since=E:N`.
///
/// Wire format: to a recovering app each such message arrives with `"seq":N` inserted as its
/// first member, the rest byte for byte — `{"seq":17,"type":"event","event":"bark_detected",…}`;
/// `device_status.data` carries `"epoch":E,"seq":LAST` (and `"recovered":BOOL` on a resume).
/// N counts up by one per device within epoch E; E changes whenever the numbering restarts (a new
/// history: a relay restart or crash, or a device this node never saw).
///
/// Bounded by count and age (`Limits`): a resume is recovered only if every message after N is
/// still held. Entries keep the message as the robot sent it (a reference to its one buffer: no
/// copy), so holding history costs no allocation per message once the ring is full-sized.
public final class DeviceHistory {
    public struct Limits: Sendable, Equatable {
        public var maxMessages = 256
        /// Nanoseconds.
        public var maxAge: UInt64 = 120_000_000_000
        public init() {}
    }

    public let epoch: String
    public let limits: Limits
    /// The newest number handed out (0: none yet).
    public private(set) var lastSeq: UInt64
    /// A ring of the newest messages: seq, when it came (monotonic ns), the message.
    private var entries: [(seq: UInt64, at: UInt64, payload: Payload)] = []
    private var head = 0

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

    /// Messages held now.
    public var count: Int { entries.count }

    /// Numbers and keeps `payload` (the next seq); returns its number.
    @discardableResult
    public func append(_ payload: Payload, now: UInt64) -> UInt64 {
        lastSeq += 1
        // Room for the whole ring at the first message, so appends never allocate again.
        if entries.isEmpty { entries.reserveCapacity(limits.maxMessages) }
        if entries.count < limits.maxMessages {
            entries.append((lastSeq, now, payload))
        } else {
            entries[head] = (lastSeq, now, payload)
            head = (head + 1) % entries.count
        }
        return lastSeq
    }

    /// Every held message after `seq`, oldest first; nil when some of them are no longer held
    /// (evicted by count or age) or `seq` is ahead of this history.
    public func messages(after seq: UInt64, now: UInt64) -> [(seq: UInt64, payload: Payload)]? {
        guard seq <= lastSeq else { return nil }
        if seq == lastSeq { return [] }
        var out: [(seq: UInt64, payload: Payload)] = []
        out.reserveCapacity(Int(lastSeq - seq))
        for k in 0..<entries.count {
            let entry = entries[(head + k) % entries.count]
            guard entry.seq > seq else { continue }
            if out.isEmpty, entry.seq != seq + 1 { return nil }  // the next one was evicted
            if now > entry.at, now - entry.at > limits.maxAge { return nil }
            out.append((entry.seq, entry.payload))
        }
        return out.count == Int(lastSeq - seq) ? out : nil
    }

    /// The held messages with their age, oldest first (what a hand-off carries).
    public func snapshot(now: UInt64) -> [(seq: UInt64, ageNanos: UInt64, bytes: [UInt8])] {
        (0..<entries.count).map { k in
            let entry = entries[(head + k) % entries.count]
            return (entry.seq, now > entry.at ? now - entry.at : 0, entry.payload.bytes)
        }
    }

    /// Rebuilds a history handed over by another node (entries oldest first, ages as carried).
    public static func restore(epoch: String, lastSeq: UInt64, entries: [(seq: UInt64, ageNanos: UInt64, bytes: [UInt8])],
                               limits: Limits, now: UInt64) -> DeviceHistory {
        let history = DeviceHistory(epoch: epoch, lastSeq: 0, limits: limits)
        for entry in entries.suffix(limits.maxMessages) {
            history.entries.append((entry.seq, now > entry.ageNanos ? now - entry.ageNanos : 0, Payload(entry.bytes)))
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
    public static func parse(recover: String?, since: String?) throws(RequestError) -> RecoveryRequest? {
        if let since {
            let parts = since.split(separator: ":", omittingEmptySubsequences: false)
            guard parts.count == 2, (1...32).contains(parts[0].count),
                  parts[0].utf8.allSatisfy({ ($0 >= 0x30 && $0 <= 0x39) || ($0 >= 0x61 && $0 <= 0x7A) || ($0 >= 0x41 && $0 <= 0x5A) || $0 == 0x2D || $0 == 0x5F }),
                  let seq = UInt64(parts[1]) else {
                throw RequestError(.badRequest, "since must be EPOCH:SEQ as device_status reported them")
            }
            return .resume(epoch: String(parts[0]), seq: seq)
        }
        switch recover {
        case nil, "0": return nil
        case "1": return .fresh
        default: throw RequestError(.badRequest, "recover must be 1")
        }
    }
}
