/// Sealed devices (docs/protocol.md "The sealed household (v1.5)"): the hub forwards their sealed
/// frames like any other and refuses the rest (`fromApp`, `fromRobot`); a new epoch reaches the
/// device's apps as `{"type":"epoch","epoch":E}`.
extension DeviceHub {
    /// `device` is sealed at `epoch` (nil: this node no longer follows it). A higher epoch than the
    /// one held is announced to the device's apps when `announce` (a new one, not a read).
    /// Service thread.
    public func setSealed(_ device: DeviceID, epoch: Int?, announce: Bool) {
        guard let epoch else {
            sealedDevices[device] = nil
            return
        }
        guard epoch > sealedDevices[device] ?? 0 else { return }
        sealedDevices[device] = epoch
        guard let entry = entry(device) else { return }
        entry.sealedEpoch = epoch
        if announce {
            for app in entry.apps { deliver(RelayMessages.epoch(epoch), to: app) }
        }
    }

    /// The device's epoch, when this node knows it is sealed.
    public func sealedEpoch(of device: DeviceID) -> Int? { sealedDevices[device] }
}
