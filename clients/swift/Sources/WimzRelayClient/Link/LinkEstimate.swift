/// What the client has learnt of its link: the round trip (RFC 6298's smoothed estimate and
/// variation, from the pongs of its own pings and the time a connection took to open) and how
/// often the relay's traffic arrives (a moving mean of the gaps between messages). From them: how
/// long a quiet link may stay quiet before it is worth a probe, and how long that probe's pong may
/// take. Both are clamped, so a wild sample can neither make the client probe a healthy link
/// again and again nor make it wait for ever.
struct LinkEstimate: Sendable, Equatable {
    /// The smoothed round trip and its variation; nil until a first sample.
    private(set) var smoothedRTT: Duration?
    private(set) var rttVariation: Duration = .zero
    /// The mean gap between messages; nil until a first gap (no pattern yet: no early probe).
    private(set) var meanGap: Duration?

    /// The quiet that sends an early probe: `gapFactor` mean gaps, at least `shortestQuiet`.
    static let gapFactor = 4
    static let shortestQuiet: Duration = .seconds(3)
    /// An early probe's pong may take as long as TCP waits before it resends (RFC 6298's
    /// retransmission timeout: the round trip and four variations), between these bounds. A
    /// pong that is merely late costs a replacement opened for nothing, never the connection.
    static let probeWaitBounds: ClosedRange<Duration> = .seconds(1) ... .seconds(5)

    /// A pong `rtt` after its ping.
    mutating func noteRoundTrip(_ rtt: Duration) {
        guard let smoothed = smoothedRTT else {
            smoothedRTT = rtt
            rttVariation = rtt / 2
            return
        }
        let deviation = smoothed > rtt ? smoothed - rtt : rtt - smoothed
        rttVariation = rttVariation * 3 / 4 + deviation / 4
        smoothedRTT = smoothed * 7 / 8 + rtt / 8
    }

    /// A connection opened in `duration`: a TCP handshake and the upgrade, two round trips at
    /// least (TLS adds more), so half of it stands for one until a pong measures better.
    mutating func noteOpened(in duration: Duration) {
        if smoothedRTT == nil { noteRoundTrip(duration / 2) }
    }

    /// A message `gap` after the one before it.
    mutating func noteGap(_ gap: Duration) {
        meanGap = meanGap.map { $0 * 3 / 4 + gap / 4 } ?? gap
    }

    /// How long the link may be quiet before the client probes it: `gapFactor` mean gaps (a
    /// stream that stops is suspect soon), never less than `shortestQuiet`, never more than
    /// `interval` (the usual liveness interval, which the relay's own pings keep from firing).
    func quietBeforeProbe(within interval: Duration) -> Duration {
        guard let meanGap else { return interval }
        return min(interval, max(Self.shortestQuiet, meanGap * Self.gapFactor))
    }

    /// How long an early probe's pong may take before the client starts opening a replacement.
    var probeWait: Duration {
        guard let smoothedRTT else { return Self.probeWaitBounds.upperBound }
        return (smoothedRTT + rttVariation * 4).clamped(to: Self.probeWaitBounds)
    }

    /// A request to the relay may go unanswered this long before the same request is sent again
    /// beside it: three of TCP's retransmission timeouts (a new connection's handshakes, then the
    /// exchange), between these bounds; `requestWaitUnmeasured` before a first sample.
    static let requestWaitBounds: ClosedRange<Duration> = .seconds(2) ... .seconds(10)
    static let requestWaitUnmeasured: Duration = .seconds(5)

    var requestWait: Duration {
        guard let smoothedRTT else { return Self.requestWaitUnmeasured }
        return ((smoothedRTT + rttVariation * 4) * 3).clamped(to: Self.requestWaitBounds)
    }
}

extension Duration {
    func clamped(to bounds: ClosedRange<Duration>) -> Duration { min(bounds.upperBound, max(bounds.lowerBound, self)) }
}
