#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
import WimzProtocol
#endif

/// Which robot events reach the push logic, as which push (docs/protocol.md v1.2 "Push
/// notifications"): only those of devices with registrations (`pushWatched`), only the kinds in
/// `Limits.pushKinds`, and `mission_progress` only when its status is `completed` — decided here,
/// once, for every component. A device without phones registered costs one flag test per event,
/// one with phones a name comparison (and, for progress updates, one `memmem`; the few that hold
/// the word are read).
extension DeviceHub {
    /// Marks `device` as having push registrations (or not). Service thread.
    public func setPushWatched(_ device: DeviceID, _ watched: Bool) {
        if watched { pushWatchedDevices.insert(device) } else { pushWatchedDevices.remove(device) }
        entry(device)?.pushWatched = watched
    }

    /// The push the event (or sealed frame, by its `kind`) may become, else nil.
    func pushKind(_ bytes: UnsafeBufferPointer<UInt8>, _ envelope: Envelope) -> PushKind? {
        guard let range = envelope.eventName else { return nil }
        let start = bytes.baseAddress! + range.lowerBound
        if envelope.kind == .sealed {
            // The robot chose the kind from the closed list (a completed mission is `mission_completed`).
            return sealedPushKinds.first { name, _ in
                name.count == range.count && name.withUnsafeBufferPointer { sameBytes(start, $0.baseAddress!, count: $0.count) }
            }?.kind
        }
        guard envelope.kind == .event else { return nil }
        for (name, kind) in pushEvents
        where name.count == range.count && name.withUnsafeBufferPointer({ sameBytes(start, $0.baseAddress!, count: $0.count) }) {
            guard kind == .missionCompleted else { return kind }
            guard DeviceHub.contains(bytes, completedNeedle),
                  MissionStateScanner.state(bytes)?.status == MissionRun.completedStatus else { return nil }
            return kind
        }
        return nil
    }

    /// Whether `needle` occurs in `haystack`: `memchr` to each candidate first byte, then `memcmp`.
    static func contains(_ haystack: UnsafeBufferPointer<UInt8>, _ needle: [UInt8]) -> Bool {
        guard let base = UnsafeRawPointer(haystack.baseAddress), !needle.isEmpty, haystack.count >= needle.count else { return false }
        let first = Int32(needle[0])
        return needle.withUnsafeBytes { n -> Bool in
            var offset = 0
            while haystack.count - offset >= n.count {
                guard let hit = memchr(base + offset, first, haystack.count - offset) else { return false }
                let at = base.distance(to: UnsafeRawPointer(hit))
                if haystack.count - at < n.count { return false }
                if memcmp(base + at, n.baseAddress!, n.count) == 0 { return true }
                offset = at + 1
            }
            return false
        }
    }

    /// Marks `device` as having Live Activity tokens (or not). Service thread.
    public func setMissionWatched(_ device: DeviceID, _ watched: Bool) {
        if watched { missionWatchedDevices.insert(device) } else { missionWatchedDevices.remove(device) }
        entry(device)?.missionWatched = watched
    }

    /// A `mission_progress` or `mode_changed` event, read (docs/protocol.md v1.4 "A mission run"),
    /// or a sealed device's `lock_screen` frame (v1.5: the progress its policy lets through); nil
    /// for anything else, or one whose `data` is not an object.
    func missionSignal(_ bytes: UnsafeBufferPointer<UInt8>, _ envelope: Envelope) -> MissionSignal? {
        if envelope.kind == .lockScreen { return MissionStateScanner.state(bytes).map(MissionSignal.progress) }
        guard envelope.kind == .event, let range = envelope.eventName else { return nil }
        let name = UnsafeBufferPointer(rebasing: bytes[range])
        let isProgress = name.elementsEqual(Self.missionProgressName), isMode = !isProgress && name.elementsEqual(Self.modeChangedName)
        if isProgress { return MissionStateScanner.state(bytes).map(MissionSignal.progress) }
        guard isMode, let data = (try? JSONReader.parse(Array(bytes)))?.member("data"), case .object = data else { return nil }
        return .modeChanged(previous: data.member("previous_mode")?.stringValue, mode: data.member("mode")?.stringValue)
    }

    static let missionProgressName = Array("mission_progress".utf8)
    static let modeChangedName = Array("mode_changed".utf8)
}
