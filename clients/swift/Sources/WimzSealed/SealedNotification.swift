import Foundation

/// What an app's Notification Service Extension does with a sealed device's push (v1.5): opens
/// the frame the relay carried, with the epoch secrets the app keeps, and nothing more. No
/// network and no socket; what it holds is the frame (at most 3.5 KiB) and the epochs passed in,
/// well within the extension's 24 MB.
///
/// ```swift
/// override func didReceive(_ request: UNNotificationRequest, withContentHandler handler: …) {
///     let epochs = try? store.epochs(of: deviceID)   // a `SealedKeyStore` the app and the extension share
///     if let frame = try? SealedNotification.open(request.content.userInfo, deviceID: deviceID, epochs: epochs ?? []) {
///         content.body = describe(frame)   // the event, "as of" frame.ts when frame.isPastState
///     }
///     handler(content)
/// }
/// ```
public enum SealedNotification {
    /// The sealed frame a push carries (`wimz.sealed`), or nil when it was too large to carry:
    /// the push then names only its kind (`wimz.event`), and the app fetches the rest when opened.
    public static func frame(in userInfo: [AnyHashable: Any]) -> Data? {
        guard let wimz = userInfo["wimz"] as? [String: Any], let sealed = wimz["sealed"] as? [String: Any] else { return nil }
        return try? JSONSerialization.data(withJSONObject: sealed)
    }

    /// The push's frame opened with `epochs` (with the app's checks: the robot's signature, the
    /// AEAD, an epoch it holds); nil when the push carries no frame. A frame older than 120 s is
    /// past state. Throws `FrameRejection` for a frame that does not open.
    public static func open(_ userInfo: [AnyHashable: Any], deviceID: String, epochs: [Epoch],
                            now: Int64 = Int64(Date().timeIntervalSince1970 * 1000)) throws -> OpenedFrame? {
        guard let frame = frame(in: userInfo) else { return nil }
        var opener = AppOpener(deviceID: deviceID)
        for epoch in epochs { opener.hold(epoch) }
        guard case .opened(let opened) = try opener.open(frame, now: now) else { return nil }
        return opened
    }
}
