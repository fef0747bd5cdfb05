/// Which robot events reach the push logic (PROTOCOL.md v1.2 "What is pushed"): only those of
/// devices with registrations (`pushWatched`), only the names in `Limits.pushEvents`, and for
/// `mission_progress` only when it may say `completed` — so devices without phones registered,
/// and the frequent progress updates, cost one flag test.
extension DeviceHub {
    /// Marks `device` as having push registrations (or not). Service thread.
    public func setPushWatched(_ device: DeviceID, _ watched: Bool) {
        if watched { pushWatchedDevices.insert(device) } else { pushWatchedDevices.remove(device) }
        entry(device)?.pushWatched = watched
    }

    func notePushable(_ payload: Payload, envelope: Envelope, device: Device, seq: UInt64) {
        guard let onPushEvent, let range = envelope.eventName, let history = device.history else { return }
        let bytes = payload.bytes
        guard let name = pushNames.first(where: { $0.count == range.count && bytes[range].elementsEqual($0) }) else { return }
        if name.elementsEqual("mission_progress".utf8), !DeviceHub.contains(bytes, "\"completed\"") { return }
        onPushEvent(device.id, String(decoding: name, as: UTF8.self), payload, (history.epoch, seq))
    }

    static func contains(_ bytes: [UInt8], _ needle: StaticString) -> Bool {
        let n = needle.utf8CodeUnitCount
        guard bytes.count >= n else { return false }
        let p = needle.utf8Start
        var i = 0
        while i <= bytes.count - n {
            if bytes[i] == p[0] {
                var k = 1
                while k < n, bytes[i + k] == p[k] { k += 1 }
                if k == n { return true }
            }
            i += 1
        }
        return false
    }
}
