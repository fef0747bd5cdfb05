import RelayCore
import RelayStore

/// The robot's settings over HTTP (docs/protocol.md "The robot's settings", v1.6):
///
///     GET /api/devices/{id}/settings   any member, or the robot →
///         200 {"desired":{"version","doc","by","at"}|null,"reported":{"version","doc","at"}|null}
///     PUT /api/devices/{id}/settings   owner, family, guest with control; If-Match: "V"; a JSON
///         object ≤ 16 KiB → 200 the new desired {"version":V+1,"doc","by","at"}
///         412 version_conflict (with the current desired) · 428 precondition_required ·
///         413 too_large · 400 invalid_settings · 409 sealed_device · 403 forbidden
///
/// Choices where the contract is silent: both answers carry `ETag: "V"` (the desired version, `"0"`
/// for none), so a client can write with the tag it read; an `If-Match` that is not one quoted
/// decimal (a list, `*`, a weak tag) is 400 `bad_request`; writes are rate-limited per token as
/// the household's calls are. The store's notification of the write hands it to the robot and
/// tells the apps, on whichever node they are (`RobotSettings`).
final class SettingsEndpoint {
    private let env: RelayEnvironment
    private let authenticator: Authenticator
    private let database: DatabaseExchanges
    /// Per token: settings writes.
    private var limiter = KeyedRateLimiter<Int64>(rate: 5, burst: 60)

    init(env: RelayEnvironment, authenticator: Authenticator, database: DatabaseExchanges) {
        (self.env, self.authenticator, self.database) = (env, authenticator, database)
    }

    /// Forgets idle limiters (the 1 s tick).
    func sweep(now: UInt64) { limiter.sweep(now: now) }

    /// `GET …/settings` (a token of `device`, checked by the router).
    func read(_ request: HTTPRequest, device: DeviceID) -> HTTPResponse? {
        database.answer(request) { db in
            let settings = try SettingsRepository(db).settings(of: device)
            return .json(200, .object([("desired", settings.desired.map(Self.desired) ?? .null),
                                       ("reported", settings.reported.map(Self.reported) ?? .null)]),
                         headers: [Self.tag(settings.desired)])
        }
    }

    /// `PUT …/settings` (an app token of the device, checked by the router).
    func write(_ request: HTTPRequest, entry: CredentialEntry, body: [UInt8]?) -> HTTPResponse? {
        guard entry.token.rights.mayCommand else {
            return .error(.forbidden, "a guest without control can't change the robot's settings")
        }
        guard limiter.allow(entry.token.id, now: env.clock.monotonic()) else {
            return .error(.authentication(.rateLimited, "too many settings writes for this token"))
        }
        let read: Int64
        switch SettingsRules.precondition(request.head.header("if-match")) {
        case .missing: return .error(.preconditionRequired, #"name the version you read: If-Match: "V" ("0" for none)"#)
        case .malformed: return .error(.badRequest, #"If-Match is one quoted version, such as "3""#)
        case .version(let version): read = version
        }
        guard let body else { return .error(.notSupported, "settings need the relay's own HTTP front") }
        let document: SettingsRules.Document
        do throws(RelayError) { document = try SettingsRules.checked(document: body, sealedDevice: nil) } catch { return .error(error) }
        let device = entry.token.deviceID, token = entry.token.id
        let address = authenticator.clientAddress(request)
        return database.answer(request) { db in
            switch try SettingsRepository(db).writeDesired(device: device, read: read, doc: document.text, sealedFrame: document.isSealedFrame,
                                                           by: token, address: address) {
            case .stored(let desired):
                return .json(200, Self.desired(desired), headers: [Self.tag(desired)])
            case .stale(let current):
                let message = "the desired settings are at version \(current?.version ?? 0), not \(read): read them again"
                return .error(RelayError(.versionConflict, message, headers: [Self.tag(current)]),
                              adding: [("desired", current.map(Self.desired) ?? .null)])
            }
        }
    }

    static func desired(_ document: SettingsDocument) -> JSONValue {
        .object([("version", .int(document.version)), ("doc", .raw(document.doc)), ("by", document.by.map(JSONValue.int) ?? .null),
                 ("at", .string(document.at.iso8601Milliseconds))])
    }

    static func reported(_ document: SettingsDocument) -> JSONValue {
        .object([("version", .int(document.version)), ("doc", .raw(document.doc)), ("at", .string(document.at.iso8601Milliseconds))])
    }

    /// `ETag: "V"`: the desired version (`"0"`: none).
    static func tag(_ desired: SettingsDocument?) -> (String, String) { ("ETag", "\"\(desired?.version ?? 0)\"") }
}
