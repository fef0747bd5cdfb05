/// The robot's last-known state (docs/protocol.md v1.2 "What the robot last said"): the latest message of
/// each replayed event, with when it arrived. The hub keeps it as the replay; this is how it
/// is read out — for the write-behind store (changed devices, once a tick) and for the
/// `/state` endpoint (one device, now).
extension DeviceHub {
    /// One replayed event as it is kept: its name, the robot's message verbatim, when it arrived.
    public struct KnownEvent: Sendable, Equatable {
        public var name: String
        public var message: [UInt8]
        public var receivedAt: UnixTime

        public init(name: String, message: [UInt8], receivedAt: UnixTime) {
            self.name = name
            self.message = message
            self.receivedAt = receivedAt
        }
    }

    /// The replayed events of every device whose replay changed since the last call (all of
    /// its events, so a write is whole); `now`/`wallClock` turn arrival times into wall time.
    public func takeChangedState(now: UInt64, wallClock: UnixTime) -> [(device: DeviceID, events: [KnownEvent])] {
        guard !changedState.isEmpty else { return [] }
        let changed = changedState
        changedState = []
        return changed.map { device in
            device.stateChanged = false
            return (device.id, knownEvents(device, now: now, wallClock: wallClock))
        }
    }

    /// `device`'s replayed events as this node holds them (none when it holds no entry).
    public func knownEvents(of device: DeviceID, now: UInt64, wallClock: UnixTime) -> [KnownEvent] {
        entry(device).map { knownEvents($0, now: now, wallClock: wallClock) } ?? []
    }

    private func knownEvents(_ device: Device, now: UInt64, wallClock: UnixTime) -> [KnownEvent] {
        var out: [KnownEvent] = []
        for (k, event) in device.replay.enumerated() {
            guard let event, !event.payload.isBinary else { continue }
            let age = now >= event.at ? now - event.at : 0
            out.append(KnownEvent(name: String(decoding: replayNames[k], as: UTF8.self), message: event.payload.bytes,
                                  receivedAt: UnixTime(microseconds: wallClock.microseconds - Int64(age / 1000))))
        }
        return out
    }

    /// The index of the replayed name equal to `bytes[range]`, if any.
    func replayIndex(of bytes: UnsafeBufferPointer<UInt8>, _ range: Range<Int>) -> Int? {
        for (index, name) in replayNames.enumerated() where name.count == range.count {
            if name.withUnsafeBufferPointer({ n in sameBytes(bytes.baseAddress! + range.lowerBound, n.baseAddress!, count: n.count) }) {
                return index
            }
        }
        return nil
    }

    /// A remembered event: the message, its number in the history (0: none) and when it arrived
    /// (monotonic nanoseconds, for the last-known state).
    struct Replayed {
        var payload: Payload
        let seq: UInt64
        let at: UInt64
    }
}
