import Foundation
import WimzProtocol
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
// Push kinds live in WimzProtocol, shared with the relay.
@_exported import enum WimzProtocol.PushKind

/// Where a phone's push token was issued: Xcode builds get sandbox tokens, TestFlight and the
/// App Store production ones.
public enum PushEnvironment: String, Sendable, Codable, CaseIterable {
    case production, sandbox

    /// Sandbox in a debug build (SwiftPM builds this library as the app is built: Xcode's Run),
    /// production otherwise (TestFlight, the App Store). Pass the environment when that guess
    /// is wrong for a build of yours.
    public static var current: PushEnvironment {
        #if DEBUG
        .sandbox
        #else
        .production
        #endif
    }
}

/// A push registration as the relay stores it (docs/protocol.md v1.2 "Push notifications").
public struct PushRegistrationInfo: Sendable, Equatable, Codable {
    public var platform: String
    /// The APNs device token, lower-case hex.
    public var token: String
    public var environment: PushEnvironment
    public var events: [PushKind]
}

/// A Live Activity token as the relay stored it (docs/protocol.md v1.4 "Tokens"): the app's
/// push-to-start token (`activityID` nil) or the update token of one of its activities.
public struct LiveActivityToken: Sendable, Equatable, Codable {
    public var activityID: String?
    /// The APNs token, lower-case hex.
    public var token: String
    public var environment: PushEnvironment
    /// When the relay stored it (`liveActivities()` only).
    public var createdAt: String?

    enum CodingKeys: String, CodingKey {
        case activityID = "activity_id", token, environment, createdAt = "created_at"
    }
}

/// What this app token handed over for the device: `liveActivities()`.
public struct LiveActivityTokens: Sendable, Equatable, Codable {
    public var startToken: LiveActivityToken?
    public var activities: [LiveActivityToken]

    enum CodingKeys: String, CodingKey { case startToken = "start_token", activities }
}

/// Where a stream resumes from: `since=EPOCH:SEQ` (docs/protocol.md v1.1 "Recovering missed events").
public struct ResumePoint: Sendable, Equatable, Codable {
    public var epoch: String
    public var seq: UInt64
    public init(epoch: String, seq: UInt64) {
        self.epoch = epoch
        self.seq = seq
    }
}

/// A push from the relay, read from the notification's `userInfo`
/// (`{"aps":{…},"wimz":{"device_id","event","count","epoch","seq"}}`):
///
/// ```swift
/// func userNotificationCenter(_ center: UNUserNotificationCenter, didReceive response: UNNotificationResponse) async {
///     guard let push = PushNotification(userInfo: response.notification.request.content.userInfo) else { return }
///     // open the robot's screen; resume the stream where this phone left it
///     let client = RelayClient(.init(url: relay, deviceID: push.deviceID, token: token,
///                                    resumeFrom: push.resumePoint(lastSeen: savedSeq)))
/// }
/// ```
public struct PushNotification: Sendable, Equatable {
    public var kind: PushKind
    public var deviceID: String
    /// How many events of `kind` this push stands for (1, or what a window counted).
    public var count: Int
    /// The latest counted event's place in the device's numbering (nil for `robot_offline`).
    public var epoch: String?
    public var seq: UInt64?

    public init?(userInfo: [AnyHashable: Any]) {
        guard let wimz = userInfo["wimz"] as? [String: Any], let kind = (wimz["event"] as? String).flatMap(PushKind.init(rawValue:)),
              let device = wimz["device_id"] as? String else { return nil }
        self.kind = kind
        deviceID = device
        count = (wimz["count"] as? NSNumber)?.intValue ?? 1
        epoch = wimz["epoch"] as? String
        seq = (wimz["seq"] as? NSNumber)?.uint64Value
    }

    /// Where to resume: this push's epoch, from `lastSeen` — the last seq this phone saw of that
    /// epoch (nil: none, so everything the relay still holds).
    public func resumePoint(lastSeen: UInt64?) -> ResumePoint? {
        epoch.map { ResumePoint(epoch: $0, seq: lastSeen ?? 0) }
    }
}

extension RelayClient {
    /// Registers this phone's push token (`didRegisterForRemoteNotificationsWithDeviceToken`'s
    /// `Data`) for `kinds` of this device. Registering the same token again replaces its kinds.
    public func registerForPush(deviceToken: Data, environment: PushEnvironment,
                                kinds: Set<PushKind> = Set(PushKind.allCases)) async throws -> PushRegistrationInfo {
        let body = JSON.object(["platform": "apns", "token": .string(deviceToken.hexString), "environment": .string(environment.rawValue),
                                "events": .array(kinds.map(\.rawValue).sorted().map { .string($0) })])
        return try decode(try await deviceRequest(.push, "PUT", body: Data(body.text.utf8), expecting: 200))
    }

    /// This app token's registrations for this device.
    public func pushRegistrations() async throws -> [PushRegistrationInfo] {
        struct List: Decodable { let registrations: [PushRegistrationInfo] }
        let list: List = try decode(try await deviceRequest(.push, "GET", expecting: 200))
        return list.registrations
    }

    /// Removes this phone's registration (e.g. when the user turns notifications off).
    public func unregisterForPush(deviceToken: Data) async throws {
        _ = try await deviceRequest(.push, "DELETE", path: [deviceToken.hexString], expecting: 204)
    }

    // MARK: - Live Activities (v1.4)

    /// Hands over the push-to-start token (iOS 17.2+: each value of
    /// `Activity<MissionActivityAttributes>.pushToStartTokenUpdates`), so the relay can start the
    /// mission's activity while the app is not running. A new one replaces the previous.
    @discardableResult
    public func registerLiveActivityStartToken(_ token: Data, environment: PushEnvironment = .current) async throws -> LiveActivityToken {
        try decode(try await deviceRequest(.liveActivity, "PUT", path: ["start-token"], body: Self.tokenBody(token, environment),
                                           expecting: 200))
    }

    /// Hands over the update token of an activity this app runs (`activity.id` and each value of
    /// `activity.pushTokenUpdates`); the same id again replaces its token. At most 4 per app token
    /// and device (`ErrorCode.tooManyActivities`).
    @discardableResult
    public func registerLiveActivity(id: String, token: Data, environment: PushEnvironment = .current) async throws -> LiveActivityToken {
        try decode(try await deviceRequest(.liveActivity, "PUT", path: ["activities", id], body: Self.tokenBody(token, environment),
                                           expecting: 200))
    }

    /// The app ended the activity or the person dismissed it: the relay sends it nothing more.
    public func endLiveActivity(id: String) async throws {
        _ = try await deviceRequest(.liveActivity, "DELETE", path: ["activities", id], expecting: 204)
    }

    /// Removes the push-to-start token (the person turned Live Activities off).
    public func removeLiveActivityStartToken() async throws {
        _ = try await deviceRequest(.liveActivity, "DELETE", path: ["start-token"], expecting: 204)
    }

    /// What this app token handed over for the device.
    public func liveActivities() async throws -> LiveActivityTokens {
        try decode(try await deviceRequest(.liveActivity, "GET", expecting: 200))
    }

    private static func tokenBody(_ token: Data, _ environment: PushEnvironment) -> Data {
        Data(JSON.object(["token": .string(token.hexString), "environment": .string(environment.rawValue)]).text.utf8)
    }

    private func decode<T: Decodable>(_ data: Data) throws -> T {
        do {
            return try JSONDecoder().decode(T.self, from: data)
        } catch {
            throw RelayClientError.invalidResponse("\(T.self): \(error)")
        }
    }

    /// `METHOD /api/devices/ID/RESOURCE[/path…]` with the app token: the body of the expected answer.
    private func deviceRequest(_ resource: WimzProtocol.Path.DeviceResource, _ method: String, path: [String] = [], body: Data? = nil,
                               expecting status: Int) async throws -> Data {
        var request = URLRequest(url: relayURL(httpBase, WimzProtocol.Path.device(configuration.deviceID, resource, path)))
        request.httpMethod = method
        request.httpBody = body
        return try await relayCall(request, token: currentToken, session: configuration.urlSession, expecting: status, retry: requestRetry)
    }
}

extension Data {
    /// Lower-case hex, as APNs device tokens are written.
    var hexString: String { map { String(format: "%02x", $0) }.joined() }
}
