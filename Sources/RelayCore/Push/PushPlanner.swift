// Push kinds live in WimzProtocol, shared with the app library.
@_exported import enum WimzProtocol.PushKind

/// A phone registered for pushes of one device (docs/protocol.md v1.2 "Push notifications").
public struct PushRegistration: Sendable, Hashable {
    public enum Environment: String, Sendable, CaseIterable { case production, sandbox }

    /// The APNs device token, lower-case hex.
    public var token: String
    public var environment: Environment
    public var device: DeviceID
    /// The app token it was registered with (its sockets mean "the app is open").
    public var appTokenID: Int64
    public var kinds: Set<PushKind>

    /// An APNs token as the contract takes it (32 to 200 hex digits, either case), lower-cased;
    /// nil for anything else. Push registrations and Live Activity tokens alike.
    public static func apnsToken(_ text: String) -> String? {
        guard (32...200).contains(text.utf8.count), text.utf8.allSatisfy({ $0.isHexDigit }) else { return nil }
        return text.lowercased()
    }

    public init(token: String, environment: Environment, device: DeviceID, appTokenID: Int64, kinds: Set<PushKind>) {
        self.token = token
        self.environment = environment
        self.device = device
        self.appTokenID = appTokenID
        self.kinds = kinds
    }
}

/// One push to send: to whom, what, and how many events it stands for.
public struct PushMessage: Sendable, Equatable {
    public var token: String
    public var environment: PushRegistration.Environment
    public var device: DeviceID
    public var kind: PushKind
    public var count: Int
    /// The latest counted event's place in the missed-event numbering (absent for robot_offline,
    /// or when the device's events are not numbered).
    public var epoch: String?
    public var seq: UInt64?
    public var locArgs: [String]
    /// A sealed device's push (v1.5): the sealed frame as received, when it fits (see
    /// `sealedFrameLimit`), or "" for one that did not. The alert is then neutral: the app's
    /// Notification Service Extension opens the frame and writes the words.
    public var sealedFrame: String?

    /// The largest sealed frame a push carries: with the rest of the body it stays under APNs's 4 KiB.
    public static let sealedFrameLimit = 3_500
    /// The alert of a sealed push, whatever happened: the relay cannot read what did.
    public static let sealedLocKey = "WIMZ_SEALED"

    public init(token: String, environment: PushRegistration.Environment, device: DeviceID, kind: PushKind, count: Int,
                epoch: String? = nil, seq: UInt64? = nil, locArgs: [String] = [], sealedFrame: String? = nil) {
        self.token = token
        self.environment = environment
        self.device = device
        self.kind = kind
        self.count = count
        self.epoch = epoch
        self.seq = seq
        self.locArgs = locArgs
        self.sealedFrame = sealedFrame
    }

    /// The APNs request body (docs/protocol.md v1.2):
    /// `{"aps":{"alert":{"loc-key":…,"loc-args":[…]},"sound":"default","thread-id":DEVICE,
    ///   "mutable-content":1},"wimz":{"device_id":…,"event":KIND,"count":N,"epoch":E,"seq":S}}`;
    /// for a sealed device (v1.5) the alert is `WIMZ_SEALED` and `wimz.sealed` the frame, when it fit.
    public var body: [UInt8] {
        var wimz: [(String, JSONValue)] = [("device_id", .string(device.rawValue)), ("event", .string(kind.rawValue)),
                                           ("count", .int(Int64(count)))]
        if let epoch, let seq { wimz += [("epoch", .string(epoch)), ("seq", .int(Int64(seq)))] }
        if let sealedFrame, !sealedFrame.isEmpty { wimz.append(("sealed", .raw(sealedFrame))) }
        let alert: JSONValue = sealedFrame != nil ? .object([("loc-key", .string(Self.sealedLocKey))])
            : .object([("loc-key", .string(kind.locKey)), ("loc-args", .array(locArgs.map { .string($0) }))])
        return JSONValue.object([
            ("aps", .object([("alert", alert), ("sound", "default"), ("thread-id", .string(device.rawValue)),
                             ("mutable-content", 1)])),
            ("wimz", .object(wimz)),
        ]).encodedBytes
    }
}

/// "Counted, not flooded" (docs/protocol.md v1.2): per registration and kind, an event outside a
/// window is pushed at once and opens a window of `interval`; events inside it are counted, and
/// when it closes one push carries their number (and opens the next window). Every event handed
/// in is in exactly one push's count. Pure state with the caller's clock (monotonic ns);
/// service-thread owned.
public struct PushPlanner {
    struct Key: Hashable {
        var token: String
        var device: DeviceID
        var kind: PushKind
    }

    struct Window {
        var closesAt: UInt64
        var pending = 0
        var last: PushMessage
    }

    public let interval: UInt64
    private var windows: [Key: Window] = [:]
    /// Every window lasts `interval`, so they close in the order they opened.
    private var closing = DeadlineFIFO<(key: Key, closesAt: UInt64)>()

    public init(interval: UInt64) { self.interval = interval }

    /// Windows open now.
    public var openWindows: Int { windows.count }

    /// An unseen event of `kind` for `registration`: the push to send now, if any.
    public mutating func event(_ message: PushMessage, now: UInt64) -> PushMessage? {
        let key = Key(token: message.token, device: message.device, kind: message.kind)
        var push = message
        push.count = 1
        if var window = windows[key] {
            if window.closesAt > now {
                window.pending += 1
                window.last = message
                windows[key] = window
                return nil
            }
            push.count += window.pending  // it closed, and `expire` has not run since: one push for both
        }
        open(key, last: message, now: now)
        return push
    }

    /// Windows that closed by `now`: one push each with the events counted in it.
    public mutating func expire(now: UInt64) -> [PushMessage] {
        var out: [PushMessage] = []
        for (key, closesAt) in closing.popExpired(now: now) {
            guard let window = windows[key], window.closesAt == closesAt else { continue }  // reopened or forgotten
            windows[key] = nil
            guard window.pending > 0 else { continue }
            var trailing = window.last
            trailing.count = window.pending
            out.append(trailing)
            open(key, last: trailing, now: now)
        }
        return out
    }

    /// Every count still waiting, as pushes now (the relay is stopping: nothing is lost).
    public mutating func flush() -> [PushMessage] {
        let out = windows.values.filter { $0.pending > 0 }.map { window -> PushMessage in
            var trailing = window.last
            trailing.count = window.pending
            return trailing
        }
        windows.removeAll()
        return out
    }

    /// Drops what is counted for `token` of `device` (its app is open now and sees the stream,
    /// or the registration is gone).
    public mutating func forget(token: String, device: DeviceID) {
        guard !windows.isEmpty else { return }
        for kind in PushKind.allCases { windows[Key(token: token, device: device, kind: kind)] = nil }
    }

    private mutating func open(_ key: Key, last: PushMessage, now: UInt64) {
        let closesAt = now + interval
        windows[key] = Window(closesAt: closesAt, last: last)
        closing.append((key, closesAt), deadline: closesAt)
    }
}
