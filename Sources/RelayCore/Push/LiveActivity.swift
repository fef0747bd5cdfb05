/// ActivityKit's `Activity.id` as the relay accepts it (docs/protocol.md v1.4 "Tokens the app hands
/// over"): 1 to 64 characters of `[A-Za-z0-9-]`.
public struct LiveActivityID: Hashable, Sendable, CustomStringConvertible {
    public static let maxLength = 64
    public let rawValue: String

    /// Nil unless `text` matches the contract's pattern exactly.
    public init?(_ text: String) {
        guard (1...Self.maxLength).contains(text.utf8.count),
              text.utf8.allSatisfy({ $0.isASCIIAlphanumeric || $0 == UInt8(ascii: "-") }) else { return nil }
        rawValue = text
    }

    public var description: String { rawValue }
}

/// A Live Activity token an app token of a device handed over: its push-to-start token, or the
/// update token of one activity it runs. Each belongs to that app token and goes with it.
public struct LiveActivityRegistration: Sendable, Hashable {
    public enum Kind: Sendable, Hashable {
        /// iOS 17.2's push-to-start token: one per app token and device.
        case startToken
        /// The update token of the activity with this id.
        case activity(LiveActivityID)
    }

    public var device: DeviceID
    public var appTokenID: Int64
    public var kind: Kind
    /// The APNs token, lower-case hex.
    public var token: String
    public var environment: PushRegistration.Environment
    /// When it was stored (nil until it is).
    public var createdAt: UnixTime?

    public init(device: DeviceID, appTokenID: Int64, kind: Kind, token: String, environment: PushRegistration.Environment,
                createdAt: UnixTime? = nil) {
        self.device = device
        self.appTokenID = appTokenID
        self.kind = kind
        self.token = token
        self.environment = environment
        self.createdAt = createdAt
    }

    /// The activity's id; nil for a start token.
    public var activityID: LiveActivityID? {
        if case .activity(let id) = kind { return id }
        return nil
    }

    /// Activities one app token may hold for one device; a fifth is refused.
    public static let activitiesPerAppToken = 4
}
