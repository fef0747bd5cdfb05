/// When each session next needs a look — its next ping, its keepalive deadline, its token's
/// expiry, a robot's TURN refresh — kept in a timing wheel, so a tick touches only the sessions
/// due then: O(due), not O(sessions). The relay turns it every 10 ms with 2,048 slots (one
/// revolution ≈ 20 s, the ping interval): with 19,000 idle sockets a tick pings ~10 of them
/// (~1,000/s spread over the second), never a burst of 1,000 that would hold up forwarding.
///
/// A session has at most one live entry (`Session.scheduledTick`); rescheduling leaves the old
/// entry behind, and it is dropped when its slot comes round, as are entries of sessions that
/// left the hub. Entries further than one revolution ahead (a token expiring in days) wait in
/// their slot and are skipped until their round.
public final class SessionScheduler {
    /// Slot width in nanoseconds and number of slots.
    public let slotWidth: UInt64
    public let slotCount: Int

    /// Internal, not private, as `slots` is: the scheduler's tests count what it holds.
    struct Entry {
        let session: Session
        let tick: UInt64
    }

    private(set) var slots: [[Entry]]
    private let origin: UInt64
    /// Every tick before this one has been handed out.
    private var nextTick: UInt64 = 0

    /// `now`: monotonic nanoseconds at which tick 0 falls.
    public init(now: UInt64, slotWidth: UInt64, slotCount: Int) {
        origin = now
        self.slotWidth = max(slotWidth, 1)
        self.slotCount = max(slotCount, 1)
        slots = [[Entry]](repeating: [], count: self.slotCount)
    }

    private func tick(at time: UInt64) -> UInt64 { time > origin ? (time - origin) / slotWidth : 0 }

    /// Asks for `session` at the first tick at or after `time` (monotonic nanoseconds), and never
    /// at a tick already handed out.
    public func schedule(_ session: Session, at time: UInt64) {
        let tick = max(tick(at: time), nextTick)
        session.scheduledTick = tick
        slots[Int(tick % UInt64(slotCount))].append(Entry(session: session, tick: tick))
    }

    /// The sessions due up to `now` that are still in the hub, each once.
    public func due(now: UInt64) -> [Session] {
        let target = tick(at: now)
        guard target >= nextTick else { return [] }
        var out: [Session] = []
        // After a stall longer than a revolution, one pass over every slot finds all of them.
        let passes = min(target - nextTick + 1, UInt64(slotCount))
        for step in 0..<passes {
            let index = Int((nextTick + step) % UInt64(slotCount))
            guard !slots[index].isEmpty else { continue }
            var kept: [Entry] = []
            for entry in slots[index] {
                if entry.tick > target {
                    kept.append(entry)  // a later round
                } else if entry.session.scheduledTick == entry.tick, entry.session.attached {
                    entry.session.scheduledTick = .max
                    out.append(entry.session)
                }
            }
            slots[index] = kept
        }
        nextTick = target + 1
        return out
    }
}

/// The relay's own keepalive (lws's is O(n) per PONG, see DESIGN.md): a ping every `interval`
/// to a socket not heard from for half of it, and a hang-up after two silent intervals. Each
/// socket's pings keep the phase it got when it connected, spread over the interval, so a
/// fleet that reconnected at once is not pinged at once.
public struct KeepalivePolicy: Sendable {
    public enum Action: Equatable { case nothing, ping, timeout }

    /// Nanoseconds between pings.
    public let interval: UInt64
    /// A tick may come this much early or late; "due" means due within it.
    public static let slack: UInt64 = 500_000_000

    public init(interval: UInt64) { self.interval = interval }

    /// The first ping of a socket connected at `now`: between half an interval and one interval
    /// later, by `fraction` (0…1, random per socket).
    public func firstPing(now: UInt64, fraction: Double) -> UInt64 {
        now + interval / 2 + UInt64(Double(interval / 2) * min(max(fraction, 0), 1))
    }

    /// What `session` needs at `now`; a ping moves its next ping one interval on.
    public func check(_ session: Session, now: UInt64) -> Action {
        if now >= session.lastHeard + 2 * interval { return .timeout }
        guard now + KeepalivePolicy.slack >= session.nextPingAt else { return .nothing }
        session.nextPingAt += interval
        if session.nextPingAt + KeepalivePolicy.slack <= now { session.nextPingAt = now + interval }  // fell behind
        // Heard from lately: the socket is alive, this round's ping is not needed.
        return now + KeepalivePolicy.slack >= session.lastHeard + interval / 2 ? .ping : .nothing
    }

    /// When `session` next needs a look for keepalive: its next ping or its silence deadline.
    public func nextCheck(_ session: Session) -> UInt64 {
        min(session.nextPingAt, session.lastHeard + 2 * interval)
    }
}
