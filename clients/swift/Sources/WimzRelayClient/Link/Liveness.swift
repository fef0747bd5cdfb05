import Foundation

// How the client tells a live link from a dead one, and waits that always end.

/// The time the client plans with: the continuous clock by default. Tests hand over one they move
/// by hand, and count the client's wake-ups without waiting for them.
public struct RelayClientClock: Sendable {
    /// Time since the clock's own origin.
    public let now: @Sendable () -> Duration
    /// Sleeps for `duration`; throws `CancellationError` when the sleeping task is cancelled first.
    public let sleep: @Sendable (Duration) async throws -> Void

    public init(now: @escaping @Sendable () -> Duration, sleep: @escaping @Sendable (Duration) async throws -> Void) {
        self.now = now
        self.sleep = sleep
    }

    /// `ContinuousClock`'s time (it keeps counting while the device sleeps), with sleeps on a
    /// Dispatch timer (``sleepOnDispatch(for:)``): `Task.sleep` wakes the process once a second
    /// for as long as any sleep is pending on Linux's Swift 6.3 runtime (measured, issue 74), which a
    /// healthy, quiet app must not do.
    public static let continuous: RelayClientClock = {
        let origin = ContinuousClock.now
        return RelayClientClock(now: { .now - origin }, sleep: { try await sleepOnDispatch(for: $0) })
    }()
}

/// Sleeps for `duration` on a one-shot Dispatch timer (uptime, with a leeway of 1 % up to 100 ms,
/// so the system may coalesce it with other wake-ups); throws `CancellationError` at once when
/// the caller is cancelled. Wakes nothing until it is due.
public func sleepOnDispatch(for duration: Duration) async throws {
    try Task.checkCancellation()
    let (seconds, attoseconds) = duration.components
    let nanoseconds = seconds >= Int64(Int.max / 1_000_000_000) ? Int.max : max(0, Int(seconds) * 1_000_000_000 + Int(attoseconds / 1_000_000_000))
    let fired = OneShot<Bool>()
    let timer = DispatchSource.makeTimerSource(queue: .global())
    timer.setEventHandler { fired.resolve(true) }
    timer.schedule(deadline: .now() + .nanoseconds(nanoseconds), leeway: .nanoseconds(min(100_000_000, max(1_000_000, nanoseconds / 100))))
    timer.activate()
    defer { timer.cancel() }
    let due = await withTaskCancellationHandler { await fired.value() } onCancel: { fired.resolve(false) }
    if !due { throw CancellationError() }
}

/// What re-arms the liveness deadline.
enum SignOfLife {
    /// A connection opened.
    case opened
    /// A message or the relay's ping: traffic, whose rhythm tells how long a quiet is normal.
    case message
    /// The pong of the client's own probe: the link is alive, and the quiet was the robot's.
    case pong
}

extension RelayClient {
    /// How long a ping the client sent may go unanswered before the link counts as dead: a
    /// quarter of the liveness interval, at most 5 s (a pong takes one round trip).
    static func pongWait(_ interval: Duration) -> Duration { min(interval / 4, .seconds(5)) }

    /// A sign of life on the open connection: the liveness deadline is armed again. One timer,
    /// re-armed rather than polled: a healthy connection wakes the app for nothing but what the
    /// relay sends. After an open the deadline is `LinkEstimate.shortestQuiet` (3 s): the relay
    /// greets every socket at once (`device_status`; a resume waiting for a hand-off, within
    /// 1.5 s), so a greeting lost with the link is probed then, not after the whole interval.
    /// After traffic it is the quiet that traffic does not explain
    /// (`LinkEstimate.quietBeforeProbe`: 3 s after a stream of events stops, the whole
    /// ``Configuration/livenessInterval`` when only the relay's pings come); after a probe's
    /// pong, the whole interval (the robot paused, the link is fine).
    func heard(_ sign: SignOfLife) {
        let now = configuration.clock.now(), interval = configuration.livenessInterval
        // The wait for the greeting is a round trip, not the rhythm of the relay's traffic.
        if sign == .message, let last = lastHeard, last.sign != .opened { estimate.noteGap(now - last.at) }
        lastHeard = (sign, now)
        abandonReplacement()
        let quiet = switch sign {
        case .opened: min(interval, LinkEstimate.shortestQuiet)
        case .message: estimate.quietBeforeProbe(within: interval)
        case .pong: interval
        }
        armLiveness(after: quiet, early: quiet < interval)
    }

    /// Something went out that the robot answers (a command): if nothing at all is heard within
    /// `pongWait`, the link is probed then instead of at the end of the quiet interval, so a
    /// command sent on a dead link is noticed within two `pongWait`s (10 s with the defaults,
    /// not 29) while the person who sent it waits. Any sign of life meanwhile re-arms the usual
    /// deadline; a slow robot on a live link costs one ping.
    func expectAnswer() {
        let wait = Self.pongWait(configuration.livenessInterval)
        guard let due = livenessDue, configuration.clock.now() + wait < due else { return }
        armLiveness(after: wait, early: false)
    }

    /// `early`: the probe at the end of `quiet` is a suspicion (its pong may take
    /// `LinkEstimate.probeWait`; unanswered, a replacement is opened beside the connection), not
    /// the verdict (unanswered within `pongWait`: the connection is dropped).
    private func armLiveness(after quiet: Duration, early: Bool) {
        livenessDeadline?.cancel()
        livenessDue = nil
        guard let socket = connection else { return }
        let clock = configuration.clock, serial = connectionSerial
        livenessDue = clock.now() + quiet
        livenessDeadline = Task { [weak self] in
            do { try await clock.sleep(quiet) } catch { return }
            await self?.quietTooLong(socket, serial: serial, early: early)
        }
    }

    /// Quiet too long: the client pings. A pong re-arms the deadline. No pong after an early
    /// probe: a replacement is opened beside the connection (Replacement.swift), and the usual
    /// rule still stands for the old one; no pong within `pongWait` at the usual deadline: the
    /// link is dead (a NAT dropped it, the relay froze) and the socket is dropped for a fresh
    /// one, whatever the transport's ping does meanwhile. With the defaults (24 s, then 5 s) a
    /// dead link is noticed within 29 s of the last sign of life on a link that carried only the
    /// relay's pings (every 20 s, so a healthy link never reaches the deadline), and within
    /// 3 s plus a fitted pong wait (1–5 s) once a stream of events stops.
    private func quietTooLong(_ socket: any WebSocketConnection, serial: Int, early: Bool) async {
        guard !Task.isCancelled, serial == connectionSerial else { return }
        let clock = configuration.clock, sent = clock.now(), interval = configuration.livenessInterval
        let answered = await answersPing(socket, within: early ? estimate.probeWait : Self.pongWait(interval), clock: clock)
        guard !Task.isCancelled, serial == connectionSerial else { return }
        if answered {
            estimate.noteRoundTrip(clock.now() - sent)
            heard(.pong)
        } else if early {
            beginReplacement()
            let quietSoFar = clock.now() - (lastHeard?.at ?? clock.now())
            armLiveness(after: max(.zero, interval - quietSoFar), early: false)
        } else {
            endingOnPurpose = true
            await socket.abort()
        }
    }
}

/// Whether `socket` answers a ping within `limit`. Whichever comes first, the pong or the
/// deadline, decides, and the other is not waited for: a transport's ping may ignore
/// cancellation, and a pong that never comes (a flow a carrier NAT dropped without a word) must
/// not hold the check until TCP gives up, many minutes later on a phone.
func answersPing(_ socket: any WebSocketConnection, within limit: Duration, clock: RelayClientClock = .continuous) async -> Bool {
    let verdict = OneShot<Bool>()
    let deadline = Task {
        do { try await clock.sleep(limit) } catch { return }
        verdict.resolve(false)
    }
    Task {
        verdict.resolve((try? await socket.ping()) != nil)
        deadline.cancel()
    }
    return await withTaskCancellationHandler { await verdict.value() } onCancel: { verdict.resolve(false) }
}

/// The first answer of a completion handler that may be called twice, or never (URLSession's
/// `sendPing` when a task is cancelled or aborted), bounded by `timeout` and the caller's
/// cancellation: exactly one of them ends the wait, and later calls change nothing.
func firstAnswer(within timeout: Duration,
                 _ start: (@escaping @Sendable ((any Error)?) -> Void) -> Void) async throws {
    let answer = OneShot<Result<Void, any Error>>()
    let deadline = Task {
        try? await sleepOnDispatch(for: timeout)
        answer.resolve(.failure(RelayClientError.timeout))
    }
    defer { deadline.cancel() }
    start { error in answer.resolve(error.map { .failure($0) } ?? .success(())) }
    try await withTaskCancellationHandler {
        try await answer.value().get()
    } onCancel: {
        answer.resolve(.failure(CancellationError()))
    }
}

/// `operation`'s answer, or `CancellationError` the moment the caller's task is cancelled (the
/// operation is cancelled too, unless `cancelsOperation` is false, and its answer, if it comes,
/// dropped): for calls that may not notice cancellation themselves (FoundationNetworking's
/// `URLSession`, a fetch others share).
func cancellable<T: Sendable>(cancelsOperation: Bool = true, _ operation: @escaping @Sendable () async throws -> T) async throws -> T {
    try Task.checkCancellation()
    let answer = OneShot<Result<T, any Error>>()
    let work = Task {
        do { answer.resolve(.success(try await operation())) } catch { answer.resolve(.failure(error)) }
    }
    return try await withTaskCancellationHandler {
        try await answer.value().get()
    } onCancel: {
        if cancelsOperation { work.cancel() }
        answer.resolve(.failure(CancellationError()))
    }
}

/// A value set once: the first ``resolve(_:)`` hands it to whoever waits (now, or as soon as
/// they wait); later ones change nothing. Each waiter's continuation is resumed exactly once.
final class OneShot<Value: Sendable>: Sendable {
    private let state = Locked<(waiting: [CheckedContinuation<Value, Never>], value: Value?)>(([], nil))

    func resolve(_ value: Value) {
        let waiting = state.withLock { state -> [CheckedContinuation<Value, Never>] in
            guard state.value == nil else { return [] }
            state.value = value
            defer { state.waiting = [] }
            return state.waiting
        }
        for continuation in waiting { continuation.resume(returning: value) }
    }

    func value() async -> Value {
        await withCheckedContinuation { continuation in
            let resolved = state.withLock { state -> Value? in
                if state.value == nil { state.waiting.append(continuation) }
                return state.value
            }
            if let resolved { continuation.resume(returning: resolved) }
        }
    }
}
