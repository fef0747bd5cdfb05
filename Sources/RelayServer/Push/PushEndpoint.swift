import RelayCore
import RelayStore

/// Push registrations (docs/protocol.md v1.2 "Push notifications"), for an app token of the device:
///
///     PUT    /api/devices/{id}/push          {"platform":"apns","token":HEX,"environment":E,"events":[KIND,…]}
///                                            → 200 the stored registration
///     GET    /api/devices/{id}/push          → 200 {"registrations":[…]} (the calling app token's)
///     DELETE /api/devices/{id}/push/{HEX}    → 204 (404: the calling token has no such registration)
///
/// Choices where the contract is silent: more than `PushRepository.perAppToken` (10) per app
/// token → 409 `too_many_registrations`; the token may be sent in either case and is stored
/// lower-case; `events` may repeat a kind (stored once).
final class PushEndpoint {
    private let env: RelayEnvironment
    private let authenticator: Authenticator
    private let database: DatabaseExchanges
    private let push: PushCoordinator

    init(env: RelayEnvironment, authenticator: Authenticator, database: DatabaseExchanges, push: PushCoordinator) {
        self.env = env
        self.authenticator = authenticator
        self.database = database
        self.push = push
    }

    /// Runs `body` for an app token of the device (the router checked it); 501 without an APNs key.
    private func withApp(_ entry: CredentialEntry, _ body: (DeviceID, CredentialEntry) -> HTTPResponse?) -> HTTPResponse? {
        guard push.isEnabled else {
            return .error(.pushNotConfigured, "this relay has no APNs key (WIMZ_APNS_KEY_FILE)")
        }
        return body(entry.token.deviceID, entry)
    }

    /// `PUT /api/devices/{id}/push`.
    func register(_ request: HTTPRequest, entry: CredentialEntry, body: [UInt8]?) -> HTTPResponse? {
        withApp(entry) { device, entry in
            guard let body else { return .error(.notSupported, "push registration needs the relay's own HTTP front") }
            let registration: PushRegistration
            switch Self.parse(body, device: device, appTokenID: entry.token.id) {
            case .failure(let error): return .error(error)
            case .success(let parsed): registration = parsed
            }
            let address = authenticator.clientAddress(request)
            let push = self.push
            return database.answer(request, onAnswer: { if $0.status == 200 { push.saved(registration) } }) { db in
                switch try PushRepository(db).save(registration, address: address) {
                case .saved(let saved): return .json(200, Self.json(saved))
                case .tooMany:
                    return .error(.tooManyRegistrations,
                                  "this app token has \(PushRepository.perAppToken) push registrations; delete one first")
                }
            }
        }
    }

    /// `GET /api/devices/{id}/push`.
    func list(_ request: HTTPRequest, entry: CredentialEntry) -> HTTPResponse? {
        withApp(entry) { device, entry in
            database.answer(request) { db in
                let mine = try PushRepository(db).registrations(device: device).filter { $0.appTokenID == entry.token.id }
                return .json(200, .object([("registrations", .array(mine.map(Self.json)))]))
            }
        }
    }

    /// `DELETE /api/devices/{id}/push/{token}`.
    func remove(_ request: HTTPRequest, entry: CredentialEntry, token: String) -> HTTPResponse? {
        withApp(entry) { device, entry in
            guard let hex = PushRegistration.apnsToken(token) else { return .error(.notFound, "no such registration") }
            return database.answer(request) { db in
                try PushRepository(db).remove(device: device, token: hex, appTokenID: entry.token.id, reason: "app")
                    ? HTTPResponse(status: 204, contentType: nil, headers: [], body: [], noStore: true)
                    : .error(.notFound, "no such registration for this app token")
            }
        }
    }

    /// The request body, checked: platform `apns`, a token of 32 to 200 hex digits, a known
    /// environment, a non-empty list of known kinds.
    static func parse(_ body: [UInt8], device: DeviceID, appTokenID: Int64) -> Result<PushRegistration, RelayError> {
        let usage = #"send {"platform":"apns","token":HEX,"environment":"production"|"sandbox","events":[KIND,…]}"#
        guard let json = try? JSONReader.parse(body), case .object = json else { return .failure(RelayError(.badRequest, usage)) }
        guard json.member("platform")?.stringValue == "apns" else { return .failure(RelayError(.badRequest, "platform must be \"apns\"")) }
        guard let token = json.member("token")?.stringValue.flatMap(PushRegistration.apnsToken) else {
            return .failure(RelayError(.badRequest, "token must be the APNs device token: 32 to 200 hex digits"))
        }
        guard let environment = json.member("environment")?.stringValue.flatMap(PushRegistration.Environment.init(rawValue:)) else {
            return .failure(RelayError(.badRequest, "environment must be \"production\" or \"sandbox\""))
        }
        guard case .array(let list)? = json.member("events"), !list.isEmpty else {
            return .failure(RelayError(.badRequest, "events must be a non-empty list of \(PushKind.allCases.map(\.rawValue))"))
        }
        var kinds: Set<PushKind> = []
        for item in list {
            guard let kind = item.stringValue.flatMap(PushKind.init(rawValue:)) else {
                return .failure(RelayError(.badRequest, "unknown event \(item.encoded.prefix(40)); known: \(PushKind.allCases.map(\.rawValue))"))
            }
            kinds.insert(kind)
        }
        return .success(PushRegistration(token: token, environment: environment, device: device, appTokenID: appTokenID, kinds: kinds))
    }

    static func json(_ registration: PushRegistration) -> JSONValue {
        .object([("platform", "apns"), ("token", .string(registration.token)),
                 ("environment", .string(registration.environment.rawValue)),
                 ("events", .array(registration.kinds.map(\.rawValue).sorted().map { .string($0) }))])
    }
}
