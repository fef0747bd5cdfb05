/// Moves between nodes (docs/cluster.md): what a device's apps must keep when another node
/// takes the device over, and taking it over here.
extension DeviceHub {
    /// What the apps of `device` must keep across a move to another node (see `DeviceHandoff`).
    public func handoffState(of device: DeviceID, now: UInt64)
        -> (since: UnixTime, robotOnline: Bool, replay: [[UInt8]], history: HistoryHandoff?)? {
        guard let d = entry(device) else { return nil }
        let history = d.history.map { HistoryHandoff(epoch: $0.epoch, lastSeq: $0.lastSeq, entries: $0.snapshot(now: now)) }
        return (d.statusSince, d.robot != nil, d.replay.compactMap { $0.flatMap { $0.payload.isBinary ? nil : $0.payload.bytes } }, history)
    }

    /// Takes over what the node that gave `device` up left: replayed events this node has not
    /// seen newer ones of, and the status time when the robot is still in transit (not here yet)
    /// or arrived after it was online there (the move is not an offline period).
    public func adoptHandoff(_ device: DeviceID, since: UnixTime, robotOnline: Bool, replay: [[UInt8]],
                             history: HistoryHandoff? = nil, now: UInt64, wallClock: UnixTime) {
        let d = entry(for: device, wallClock: wallClock)
        // The numbering goes on where the other node left it, unless this node numbered
        // messages of its own meanwhile (then those apps' sequence wins).
        if let history, (d.history?.lastSeq ?? 0) == 0 {
            if let old = d.history { historyMemory.release(device, old) }
            let restored = DeviceHistory.restore(epoch: history.epoch, lastSeq: history.lastSeq, entries: history.entries,
                                                 limits: limits.history, now: now, used: &historyMemory.used)
            d.history = restored
            historyMemory.resumed(device, restored)
            if historyMemory.used > historyMemory.limit { historyMemory.evict() }
        }
        defer { releaseParked(d, now: now) }
        for bytes in replay {
            let envelope = Envelope.scan(bytes)
            if let name = envelope.eventName, let index = bytes.withUnsafeBufferPointer({ replayIndex(of: $0, name) }) {
                d.prepareReplay(replayNames.count)
                guard d.replay[index] == nil else { continue }
                d.replay[index] = Replayed(payload: Payload(bytes), seq: 0, at: now)  // (the hand-off does not carry arrival times)
            }
        }
        if d.robot != nil {
            if robotOnline, since < d.statusSince { d.statusSince = since }  // online all along
        } else if robotOnline {
            d.carriedOnlineSince = (since, now + DeviceHub.handoffValidity)  // in transit
        } else {
            d.statusSince = since  // offline since then, not since it arrived here
        }
    }
}
