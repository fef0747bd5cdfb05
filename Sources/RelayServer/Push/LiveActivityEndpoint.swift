import RelayCore
import RelayStore

/// The Live Activity tokens an app hands over (docs/protocol.md v1.4), for an app token of the
/// device, any access level:
///
///     PUT    /api/devices/{id}/live-activity/start-token          {"token":HEX,"environment":E} → 200 {"token","environment"}
///     DELETE /api/devices/{id}/live-activity/start-token          → 204 (404: none)
///     PUT    /api/devices/{id}/live-activity/activities/{aid}     {"token":HEX,"environment":E} → 200 {"activity_id","token","environment"}
///     DELETE /api/devices/{id}/live-activity/activities/{aid}     → 204 (404: unknown)
///     GET    /api/devices/{id}/live-activity                      → 200 {"start_token":{…}|null,"activities":[…]}
///
/// Choices where the contract is silent: the token is stored lower-case and answered so; an
/// unknown member of the body is ignored (as in v1.2 registrations); a malformed activity id in a
/// DELETE is 404 (no such activity can exist), in a PUT 400.
final class LiveActivityEndpoint {
    private let authenticator: Authenticator
    private let database: DatabaseExchanges
    private let push: PushCoordinator

    init(authenticator: Authenticator, database: DatabaseExchanges, push: PushCoordinator) {
        self.authenticator = authenticator
        self.database = database
        self.push = push
    }

    /// `PUT …/start-token` (`activity` nil) or `PUT …/activities/{activity}`.
    func register(_ request: HTTPRequest, entry: CredentialEntry, activity: String?, body: [UInt8]?) -> HTTPResponse? {
        guard push.isEnabled else { return Self.notConfigured }
        guard let body else { return .error(.notSupported, "Live Activity tokens need the relay's own HTTP front") }
        let kind: LiveActivityRegistration.Kind
        if let activity {
            guard let id = LiveActivityID(activity) else {
                return .error(.badRequest, "activity_id must be 1 to 64 characters of A-Z, a-z, 0-9 and -")
            }
            kind = .activity(id)
        } else {
            kind = .startToken
        }
        let registration: LiveActivityRegistration
        switch Self.parse(body, device: entry.token.deviceID, appTokenID: entry.token.id, kind: kind) {
        case .failure(let error): return .error(error)
        case .success(let parsed): registration = parsed
        }
        let address = authenticator.clientAddress(request)
        return database.answer(request) { db in
            switch try LiveActivityRepository(db).save(registration, address: address) {
            case .saved(let saved): return .json(200, Self.json(saved, listed: false))
            case .tooMany:
                return .error(.tooManyActivities, "this app token has \(LiveActivityRegistration.activitiesPerAppToken) "
                              + "Live Activities on this device; delete one first")
            }
        }
    }

    /// `DELETE …/start-token` (`activity` nil) or `DELETE …/activities/{activity}`.
    func remove(_ request: HTTPRequest, entry: CredentialEntry, activity: String?) -> HTTPResponse? {
        guard push.isEnabled else { return Self.notConfigured }
        let id: LiveActivityID?
        if let activity {
            guard let parsed = LiveActivityID(activity) else { return .error(.notFound, "no such Live Activity") }
            id = parsed
        } else {
            id = nil
        }
        let device = entry.token.deviceID, appToken = entry.token.id
        return database.answer(request) { db in
            try LiveActivityRepository(db).remove(device: device, appTokenID: appToken, activity: id, reason: "app")
                ? HTTPResponse(status: 204, contentType: nil, headers: [], body: [], noStore: true)
                : .error(.notFound, id == nil ? "this app token has no start token here" : "no such Live Activity for this app token")
        }
    }

    /// `GET /api/devices/{id}/live-activity`: the calling app token's own.
    func list(_ request: HTTPRequest, entry: CredentialEntry) -> HTTPResponse? {
        guard push.isEnabled else { return Self.notConfigured }
        let device = entry.token.deviceID, appToken = entry.token.id
        return database.answer(request) { db in
            let mine = try LiveActivityRepository(db).registrations(device: device).filter { $0.appTokenID == appToken }
            let start = mine.first { $0.activityID == nil }
            return .json(200, .object([("start_token", start.map { Self.json($0, listed: false) } ?? .null),
                                       ("activities", .array(mine.filter { $0.activityID != nil }.map { Self.json($0, listed: true) }))]))
        }
    }

    private static var notConfigured: HTTPResponse {
        .error(.pushNotConfigured, "this relay has no APNs key (WIMZ_APNS_KEY_FILE)")
    }

    /// The body, checked: `{"token":HEX,"environment":"production"|"sandbox"}`.
    static func parse(_ body: [UInt8], device: DeviceID, appTokenID: Int64,
                      kind: LiveActivityRegistration.Kind) -> Result<LiveActivityRegistration, RelayError> {
        let usage = #"send {"token":HEX,"environment":"production"|"sandbox"}"#
        guard let json = try? JSONReader.parse(body), case .object = json else { return .failure(RelayError(.badRequest, usage)) }
        guard let token = json.member("token")?.stringValue.flatMap(PushRegistration.apnsToken) else {
            return .failure(RelayError(.badRequest, "token must be the APNs token: 32 to 200 hex digits"))
        }
        guard let environment = json.member("environment")?.stringValue.flatMap(PushRegistration.Environment.init(rawValue:)) else {
            return .failure(RelayError(.badRequest, "environment must be \"production\" or \"sandbox\""))
        }
        return .success(LiveActivityRegistration(device: device, appTokenID: appTokenID, kind: kind, token: token, environment: environment))
    }

    /// As the app sees it; `listed` adds `created_at` (the list's activities).
    static func json(_ registration: LiveActivityRegistration, listed: Bool) -> JSONValue {
        var members: [(String, JSONValue)] = []
        if let id = registration.activityID { members.append(("activity_id", .string(id.rawValue))) }
        members += [("token", .string(registration.token)), ("environment", .string(registration.environment.rawValue))]
        if listed, let created = registration.createdAt { members.append(("created_at", .string(created.iso8601))) }
        return .object(members)
    }
}
