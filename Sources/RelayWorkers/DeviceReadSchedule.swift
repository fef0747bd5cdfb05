/// When the store monitor reads the devices that arrived (`FollowedDevices`). A token's lookup
/// holds a handshake; a device's read holds nothing (its push-worthy events and mission signals
/// wait for it in the relay, none lost). So during a storm of lookups — at least `stormLookups`
/// tokens answered within `quiet` — arrived devices wait, and are read once lookups have paused for
/// `quiet`, or once the longest-waiting has waited `latest`. Each step then reads at most `chunk`
/// of them: a lookup asked meanwhile waits for one chunk at most. Outside a storm (a node taking
/// a client or two) a device is read at once, so its first push is not held back.
///
/// The read also tells the hub that a device is sealed (v1.5): until it is in, a plain frame to
/// or from a sealed device that has just arrived is forwarded rather than refused — as before,
/// for the read's milliseconds, and during a storm now for up to `latest`. The ends never open a
/// plain frame of a device they know is sealed; the relay's refusal is the clear error for one
/// that does not know yet.
///
/// Measured (docs/performance.md, session 34): read with each batch of lookups, a storm's devices
/// held the connection for most of its time and the cold storm ran at 0.61× the warm rate.
public struct DeviceReadSchedule: Sendable {
    /// How long lookups must have paused before devices are read during a storm.
    static let quiet: UInt64 = 100_000_000
    /// The longest a device waits for lookups to pause.
    static let latest: UInt64 = 2_000_000_000
    /// Most devices read in one step (one transaction).
    static let chunk = 128

    /// Tokens answered within `quiet` that make a storm (a lone handshake is not one).
    let stormLookups: Int
    /// When the last lookup was answered (nil: none yet).
    private var lastLookupAt: UInt64?
    /// Tokens answered since `windowStart`, and in the `quiet` before it.
    private var windowStart: UInt64 = 0
    private var inWindow = 0
    private var inWindowBefore = 0

    /// `stormLookups`: tokens answered within `quiet` that make a storm.
    public init(stormLookups: Int = 64) { self.stormLookups = stormLookups }

    /// `tokens` were answered at `now`.
    mutating func lookedUp(_ tokens: Int, at now: UInt64) {
        advanceWindow(to: now)
        inWindow += tokens
        lastLookupAt = now
    }

    /// Whether devices queued since `oldestQueuedAt` (nil: none queued) are to be read now.
    func isDue(oldestQueuedAt: UInt64?, now: UInt64) -> Bool {
        millisecondsUntilDue(oldestQueuedAt: oldestQueuedAt, now: now) == 0
    }

    /// How long until queued devices are due: 0 when they are, nil when none is queued.
    func millisecondsUntilDue(oldestQueuedAt: UInt64?, now: UInt64) -> Int32? {
        guard let queued = oldestQueuedAt else { return nil }
        guard let last = lastLookupAt, isStorm(at: now) else { return 0 }
        let due = min(last + Self.quiet, queued + Self.latest)
        guard due > now else { return 0 }
        return Int32(clamping: (due - now + 999_999) / 1_000_000)
    }

    /// Whether at least `stormLookups` tokens were answered within `quiet` before `now` (counted
    /// in windows of `quiet`: this one and the one before).
    private func isStorm(at now: UInt64) -> Bool {
        var window = self
        window.advanceWindow(to: now)
        return window.inWindow + window.inWindowBefore >= stormLookups
    }

    private mutating func advanceWindow(to now: UInt64) {
        guard now >= windowStart + Self.quiet else { return }
        inWindowBefore = now < windowStart + 2 * Self.quiet ? inWindow : 0
        inWindow = 0
        windowStart = now
    }
}
