// Close codes and their reconnect meaning live in WimzProtocol, shared with the app library.
@_exported import enum WimzProtocol.CloseCode
// Error codes too: the hub's error frames and the server's error bodies use the one list.
@_exported import enum WimzProtocol.ErrorCode

/// Why a message was not delivered (feeds metrics, labelled by `label`).
public enum DropReason: Hashable, Sendable {
    /// An app's message, refused with this error code (`rate_limited`, `device_offline`,
    /// `forbidden_type`, `bad_message`, `robot_busy`: the robot's queue was full, the robot kept).
    case refused(ErrorCode)
    /// A slow consumer's queue overflowed (it is closed with 4008).
    case queueFull
    /// A robot's response to no command that is waiting.
    case unknownResponse
    /// A robot event while no app is connected.
    case noApps
    /// A robot's unsealed frame on a sealed device (v1.5): no app would open it.
    case unsealed

    public var label: String {
        switch self {
        case .refused(let code): code.rawValue
        case .queueFull: "queue_full"
        case .unknownResponse: "unknown_response"
        case .noApps: "no_apps"
        case .unsealed: "unsealed"
        }
    }
}

/// Messages and bytes the hub accepted for forwarding, per direction (`wimz_*_forwarded_total`).
public struct ForwardedCounts: Sendable {
    public struct Count: Sendable {
        public internal(set) var messages = 0
        public internal(set) var bytes = 0
        mutating func add(_ size: Int) {
            messages += 1
            bytes += size
        }
    }
    public internal(set) var robotToApps = Count()
    public internal(set) var appToRobot = Count()
}

/// How a session reaches its socket: subclassed by the server over libwebsockets, by a recorder
/// in tests. A class, not a protocol, so the session can call it through an unmanaged reference
/// (no retain and release per message).
open class SessionTransport {
    public init() {}
    /// Ask for a write opportunity (the socket will drain the queue or send the close).
    open func requestWrite() {}
}

/// One authenticated WebSocket: a robot or an app of one device. Owned by the service thread.
public final class Session {
    public let id: UInt64
    public let role: Role
    public let deviceID: DeviceID
    public let tokenID: Int64
    /// When the token stops working (a member's `until`): a change reaches live sessions.
    public var tokenExpiresAt: UnixTime?
    /// An app's access (docs/protocol.md v1.3); a change applies from the next frame.
    public private(set) var rights: MemberRights
    /// `rights.mayCommand`, as a plain flag: read per command frame.
    public private(set) var mayCommand: Bool
    /// `"from":{…},` as a robot that opted in (`senders=1`) gets it inserted into this app's frames.
    public private(set) var senderMember: [UInt8] = []
    /// A robot that connected with `senders=1`: app frames and HTTP requests carry `from`.
    public var wantsSenders = false
    public let remoteAddress: String
    public let connectedAt: UnixTime
    /// Not retained: the server clears it when the socket closes, before the transport can go
    /// (its debug builds check that in the transport's deinit); tests keep theirs alive. A weak
    /// reference gave the connection a side table, and every message paid a weak load and the
    /// slow path of a release; a strong one a retain and release (docs/performance.md, session 14).
    public var transport: SessionTransport? {
        get { transportLink?.takeUnretainedValue() }
        set { transportLink = newValue.map { Unmanaged.passUnretained($0) } }
    }
    private var transportLink: Unmanaged<SessionTransport>?

    /// `transport.requestWrite()`, without a reference count.
    @inline(__always) private func requestWrite() {
        transportLink?._withUnsafeGuaranteedRef { $0.requestWrite() }
    }

    public var queue: SendQueue
    /// Set when the session must close: the next write opportunity sends this close frame.
    public private(set) var closing: (code: CloseCode, reason: String)?

    // Keepalive bookkeeping (monotonic nanoseconds).
    public var lastHeard: UInt64
    /// When the next ping is due (its phase is chosen at connect, see `KeepalivePolicy`).
    public var nextPingAt: UInt64
    public var pingDue = false
    /// The tick of this session's live entry in the `SessionScheduler` (.max: none).
    var scheduledTick: UInt64 = .max

    // Counters for the audit log and metrics.
    public var messagesIn = 0
    public var bytesIn = 0
    public var messagesOut = 0
    public var bytesOut = 0
    public var consecutiveRateLimited = 0

    /// The robot's newest TURN credential (pushed or fetched): when to push the next one.
    public var turnRefreshAt: UnixTime?
    public var turnExpiresAt: UnixTime?

    var rateLimiter: TokenBucket?
    /// An app that asked for missed-event recovery (`recover=1`/`since=`): set before attaching.
    public var recovery: RecoveryRequest? {
        didSet { recovers = recovery != nil }
    }
    /// `recovery != nil`, as a plain flag: the fan-out loop reads it per app and message, where
    /// copying the request (its epoch string) would cost a reference count each time.
    private(set) var recovers = false
    /// The hub's entry for this session's device while the hub routes to it (nil otherwise),
    /// so routing a message needs no table lookup.
    var device: DeviceHub.Device?
    var attached: Bool { device != nil }

    public init(id: UInt64, role: Role, deviceID: DeviceID, tokenID: Int64, tokenExpiresAt: UnixTime?,
                rights: MemberRights = MemberRights(access: .owner, control: false),
                remoteAddress: String, connectedAt: UnixTime, now: UInt64, queue: SendQueue) {
        self.id = id
        self.role = role
        self.deviceID = deviceID
        self.tokenID = tokenID
        self.tokenExpiresAt = tokenExpiresAt
        self.rights = rights
        mayCommand = rights.mayCommand
        self.remoteAddress = remoteAddress
        self.connectedAt = connectedAt
        self.queue = queue
        lastHeard = now
        nextPingAt = now
        senderMember = Session.senderMember(tokenID: tokenID, rights: rights)
    }

    /// A change of the member's access or control (the token cache heard of it).
    public func update(rights: MemberRights) {
        guard rights != self.rights else { return }
        self.rights = rights
        mayCommand = rights.mayCommand
        senderMember = Session.senderMember(tokenID: tokenID, rights: rights)
    }

    /// `"from":{"token_id":N,"access":A,"control":BOOL}` (docs/protocol.md v1.3 "Who is speaking").
    public static func sender(tokenID: Int64, rights: MemberRights) -> JSONValue {
        .object([("token_id", .int(tokenID)), ("access", .string(rights.access.rawValue)),
                 ("control", .bool(rights.mayCommand))])
    }

    /// `{"token_id","access","control","until"}`: an app's own access, in its greeting.
    public var member: JSONValue {
        .object([("token_id", .int(tokenID))] + rights.fields(until: tokenExpiresAt))
    }

    private static func senderMember(tokenID: Int64, rights: MemberRights) -> [UInt8] {
        Array(#""from":"#.utf8) + sender(tokenID: tokenID, rights: rights).encodedBytes
    }

    /// Queues a message; false when the queue is full (the caller culls the session).
    func enqueue(_ payload: Payload, numbering: Numbering? = nil) -> Bool {
        guard closing == nil else { return true }
        let wasEmpty = queue.isEmpty
        guard queue.push(payload, numbering: numbering) else { return false }
        if wasEmpty { requestWrite() }
        return true
    }

    /// Marks the session for closing with `code`; queued messages are dropped. Outside the hub a
    /// session is closed by `DeviceHub.close(_:_:reason:)`, which also stops routing to it.
    func close(_ code: CloseCode, reason: String) {
        guard closing == nil else { return }
        closing = (code, reason)
        queue.removeAll()
        requestWrite()
    }
}
