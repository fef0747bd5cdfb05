import Foundation
import RelayCore
import RelayStore

/// The admin API's handlers. They run on the database worker thread (never the service
/// thread) and turn a request into a status and a JSON body. Routes and shapes are described
/// in docs/openapi.json; the router (`Routes.table`) matched the route and checked the admin
/// token, and names the endpoint.
enum AdminAPI {
    /// One admin operation (a row of `Routes.table`).
    enum Endpoint: Sendable, Equatable {
        case listDevices, addDevice, device, disableDevice, enableDevice, issueToken, mintPairingCode, pushRegistrations, liveActivities
        case listTokens, revokeToken, turnSecrets, rotateTurnSecret, audit, clusterNodes, members
    }

    struct Request: Sendable {
        var method: String
        var path: String
        /// The route's `{id}`, when it has one.
        var id: String?
        var query: [String: String]
        var body: [UInt8]
        var remoteAddress: String
        /// When the request came (the relay's clock): what "expired" means in listings.
        var at: UnixTime
    }

    static let actor = "admin-api"

    /// Runs `endpoint` for `r`. Throws `RelayError` for client errors; store errors are mapped too.
    /// `configuration` gives what the relay itself uses: the TURN realm, the pairing codes' lifetime.
    static func handle(_ endpoint: Endpoint, _ r: Request, db: PGConnection,
                       configuration: RelayConfiguration) throws -> (Int, JSONValue) {
        do {
            switch endpoint {
            case .listDevices:
                let online = try ClusterRepository(db).presence(of: nil)
                return (200, .object([("devices", .array(try DeviceRepository(db).list().map {
                    device($0, online: online[$0.id]?.online ?? false)
                }))]))
            case .addDevice:
                let body = try Body(r.body)
                guard let idText = try body.text("id"), let id = DeviceID(idText) else {
                    throw RelayError(.badRequest, "id must match [A-Za-z0-9_.-]{1,64}")
                }
                return (201, device(try DeviceRepository(db).add(id, name: try body.text("name") ?? "", actor: actor)))
            case .device:
                let id = try deviceID(r)
                guard let record = try DeviceRepository(db).get(id) else {
                    throw RelayError(.notFound, "unknown device \(id)")
                }
                let online = try ClusterRepository(db).presence(of: [record.id])[record.id]?.online ?? false
                guard case .object(let fields) = device(record, online: online) else { return (200, device(record, online: online)) }
                // The household's timeline (v1.6), as an operator sees it: sizes and times, no entry's contents.
                return (200, .object(fields + [("timeline", try TimelineRepository(db).summary(device: id).json)]))
            case .disableDevice, .enableDevice:
                let disable = endpoint == .disableDevice
                return (200, device(try DeviceRepository(db).setDisabled(try deviceID(r), disable, actor: actor).device))
            case .issueToken: return try issueToken(r, db: db)
            case .mintPairingCode: return try mintPairingCode(r, db: db, configuration: configuration)
            case .pushRegistrations:
                let registrations = try PushRepository(db).registrations(device: try deviceID(r))
                return (200, .object([("registrations", .array(registrations.map(pushRegistration)))]))
            case .liveActivities:
                let registrations = try LiveActivityRepository(db).registrations(device: try deviceID(r))
                return (200, .object([("live_activities", .array(registrations.map(liveActivity)))]))
            case .members:
                let members = try HouseholdRepository(db).members(device: try deviceID(r))
                return (200, .object([("members", .array(members.map { token($0, at: r.at) }))]))
            case .listTokens:
                let device = try r.query["device_id"].map(deviceID)
                return (200, .object([("tokens", .array(try TokenRepository(db).list(device: device).map { token($0, at: r.at) }))]))
            case .revokeToken:
                guard let id = r.id.flatMap({ Int64($0) }) else {
                    throw RelayError(.badRequest, "token id must be a number")
                }
                return (200, token(try TokenRepository(db).revoke(id: id, actor: actor).token, at: r.at))
            case .turnSecrets:
                let secrets = try TurnRepository(db).secrets(realm: try realm(r.query["realm"] ?? configuration.turnRealm))
                return (200, .object([("secrets", .array(secrets.enumerated().map { secret($1, signing: $0 == 0) }))]))
            case .rotateTurnSecret:
                let named = r.body.isEmpty ? nil : try Body(r.body).text("realm")
                let realm = try realm(named ?? r.query["realm"] ?? configuration.turnRealm)
                return (201, secret(try TurnRepository(db).add(realm: realm, value: nil, actor: actor, kind: .turnSecretRotated),
                                    signing: true))
            case .audit: return try audit(r, db: db)
            case .clusterNodes:
                return (200, .object([("nodes", .array(try ClusterRepository(db).nodes().map(node)))]))
            }
        } catch let error as StoreError where error.kind == .notFound {
            throw RelayError(.notFound, error.message)
        } catch let error as StoreError where error.kind == .conflict {
            throw RelayError(.conflict, error.message)
        }
    }

    /// `POST /admin/devices/{id}/tokens`.
    static func issueToken(_ r: Request, db: PGConnection) throws -> (Int, JSONValue) {
        let body = try Body(r.body)
        guard let roleText = try body.text("role"), let role = Role(rawValue: roleText) else {
            throw RelayError(.badRequest, "role must be robot or app")
        }
        let expiresIn = try body.int("expires_in")
        if let e = expiresIn, !(1...maxTokenLifetime).contains(e) {
            throw RelayError(.badRequest, "expires_in must be from 1 to \(maxTokenLifetime) seconds")
        }
        // v1.3: an app token's access (owner unless given) and a guest's control; a guest without
        // expires_in gets the longest an invited guest may have (30 days). Not for robot tokens.
        let accessText = try body.text("access")
        let controlFlag = try body.bool("control")
        if role == .robot, accessText.map({ $0 != "owner" }) ?? false || controlFlag == true {
            throw RelayError(.badRequest, "a robot token is its device's owner: access family or guest and control are for app tokens")
        }
        guard let access = Access(rawValue: accessText ?? "owner") else { throw RelayError(.badRequest, "access must be owner, family or guest") }
        let lifetime = access == .guest ? expiresIn ?? HouseholdRules.guestHorizon : expiresIn
        let issued = try TokenRepository(db).issue(device: try deviceID(r), role: role, label: try body.text("label") ?? "",
                                                   expiresIn: lifetime,
                                                   rights: MemberRights(access: access, control: controlFlag ?? false), actor: actor)
        return (201, .object([("token", token(issued.record, at: r.at)), ("secret", .string(issued.secret))]))
    }

    /// `POST /admin/devices/{id}/pairing-codes`: the relay's pairing TTL unless the body asks for
    /// another within the same range.
    static func mintPairingCode(_ r: Request, db: PGConnection, configuration: RelayConfiguration) throws -> (Int, JSONValue) {
        let asked = r.body.isEmpty ? nil : try Body(r.body).int("expires_in")
        let ttl = asked ?? Int64(configuration.pairingCodeSeconds)
        let range = RelayConfiguration.pairingCodeRange
        guard range.contains(Double(ttl)) else {
            throw RelayError(.badRequest, "expires_in must be \(range.text) seconds")
        }
        let minted = try PairingRepository(db).create(device: try deviceID(r), ttl: Int(ttl), actor: actor, address: r.remoteAddress)
        return (201, .object([("code", .string(minted.code)), ("expires_at", .string(minted.expiresAt.iso8601)),
                              ("expires_in", .int(Int64(minted.expiresIn)))]))
    }

    /// `GET /admin/audit`.
    static func audit(_ r: Request, db: PGConnection) throws -> (Int, JSONValue) {
        guard let limit = Int(r.query["limit"] ?? "100"), (1...1000).contains(limit) else {
            throw RelayError(.badRequest, "limit must be an integer from 1 to 1000")
        }
        guard let after = Int64(r.query["after"] ?? "0"), after >= 0 else {
            throw RelayError(.badRequest, "after must be a non-negative integer")
        }
        func time(_ key: String) throws -> UnixTime? {
            guard let text = r.query[key] else { return nil }
            guard let t = UnixTime(iso8601: text) else {
                throw RelayError(.badRequest, "\(key) must be an ISO 8601 time")
            }
            return t
        }
        let entries = try AuditRepository(db).query(deviceID: try r.query["device_id"].map(deviceID)?.rawValue,
                                                    from: try time("from"), to: try time("to"),
                                                    afterSequence: after, limit: limit)
        return (200, .object([("entries", .array(entries.map(audit))),
                              ("next_after", entries.count == limit ? .int(entries.last!.sequence) : .null)]))
    }

    /// A request body: one JSON object (strict `JSONReader`), read once; its optional members
    /// type-checked (a label of {} is a 400, not "").
    struct Body {
        let value: JSONValue

        init(_ bytes: [UInt8]) throws {
            guard !bytes.isEmpty, let value = try? JSONReader.parse(bytes), case .object = value else {
                throw RelayError(.invalidJSON, "the body must be a JSON object")
            }
            self.value = value
        }

        /// A text member; control characters refused (PostgreSQL text cannot hold NUL, and names
        /// end up in logs and listings).
        func text(_ key: String) throws -> String? {
            guard let member = value.member(key), member != .null else { return nil }
            guard let text = member.stringValue else { throw Body.wrongType }
            if text.unicodeScalars.contains(where: { $0.value < 0x20 || $0.value == 0x7F }) {
                throw RelayError(.badRequest, "names and labels must not contain control characters")
            }
            return text
        }

        func bool(_ key: String) throws -> Bool? {
            guard let member = value.member(key), member != .null else { return nil }
            guard let flag = member.boolValue else { throw Body.wrongType }
            return flag
        }

        func int(_ key: String) throws -> Int64? {
            guard let member = value.member(key), member != .null else { return nil }
            guard let number = member.intValue else { throw Body.wrongType }
            return number
        }

        static let wrongType = RelayError(.badRequest, "a body member has the wrong type")
    }

    /// The longest token lifetime the API issues (ten years), far inside PostgreSQL's time range.
    static let maxTokenLifetime: Int64 = 10 * 366 * 86_400

    /// A TURN realm: `[A-Za-z0-9_.-]{1,64}`, like the device ids (coturn takes it in its config).
    static func realm(_ text: String) throws -> String {
        guard DeviceID(text) != nil else {
            throw RelayError(.badRequest, "realm must match [A-Za-z0-9_.-]{1,64}")
        }
        return text
    }

    static func deviceID(_ text: String) throws -> DeviceID {
        guard let id = DeviceID(text) else { throw RelayError(.badRequest, "invalid device id") }
        return id
    }

    /// The route's `{id}` as a device id.
    static func deviceID(_ r: Request) throws -> DeviceID { try deviceID(r.id ?? "") }

    /// A device; `online` (cluster-wide: its robot is connected to a live node) where known.
    static func device(_ d: DeviceRecord, online: Bool? = nil) -> JSONValue {
        var fields: [(String, JSONValue)] = [
            ("id", .string(d.id.rawValue)), ("name", .string(d.name)), ("created_at", .string(d.createdAt.iso8601)),
            ("disabled", .bool(d.isDisabled)), ("disabled_at", .optional(d.disabledAt?.iso8601))]
        if let online { fields.append(("online", .bool(online))) }
        return .object(fields)
    }

    static func node(_ n: ClusterNode) -> JSONValue {
        .object([("node_id", .string(n.nodeID)), ("address", .string(n.address)), ("started_at", .string(n.startedAt.iso8601)),
                 ("renewed_at", .string(n.renewedAt.iso8601)), ("lease_expires_at", .string(n.leaseExpiresAt.iso8601)),
                 ("lease_age_seconds", .double((n.leaseAgeSeconds * 1000).rounded() / 1000)), ("live", .bool(n.isLive)),
                 ("draining", .bool(n.draining)), ("sockets", .int(Int64(n.sockets))), ("devices", .int(Int64(n.devices)))])
    }

    static func token(_ t: TokenRecord, at now: UnixTime) -> JSONValue {
        let status = t.revokedAt != nil ? "revoked" : t.isExpired(at: now) ? "expired" : "active"
        return .object([("id", .int(t.id)), ("device_id", .string(t.deviceID.rawValue)), ("role", .string(t.role.rawValue)),
                        ("label", .string(t.label)), ("status", .string(status)), ("created_at", .string(t.createdAt.iso8601)),
                        ("expires_at", .optional(t.expiresAt?.iso8601)), ("revoked_at", .optional(t.revokedAt?.iso8601)),
                        ("last_used_at", .optional(t.lastUsedAt?.iso8601)), ("access", .string(t.access.rawValue)),
                        ("control", .bool(t.rights.mayCommand))])
    }

    static func secret(_ s: TurnSecret, signing: Bool) -> JSONValue {
        .object([("id", .int(s.id)), ("realm", .string(s.realm)), ("secret_masked", .string(s.masked)),
                 ("created_at", .string(s.createdAt.iso8601)), ("signing", .bool(signing))])
    }

    static func audit(_ e: AuditRepository.Entry) -> JSONValue {
        .object([("sequence", .int(e.sequence)), ("id", .string(e.event.id.description)), ("at", .string(e.event.at.iso8601)),
                 ("event", .string(e.event.kind.rawValue)), ("actor", .string(e.event.actor)),
                 ("device_id", .optional(e.event.deviceID)), ("token_id", e.event.tokenID.map { .int($0) } ?? .null),
                 ("remote_addr", .optional(e.event.remoteAddress)), ("details", .raw(e.detailsJSON))])
    }

    /// A push registration as operators see it: whose (the app token's id) and what for.
    static func pushRegistration(_ r: PushRegistration) -> JSONValue {
        .object([("device_id", .string(r.device.rawValue)), ("token", .string(r.token)), ("environment", .string(r.environment.rawValue)),
                 ("app_token_id", .int(r.appTokenID)), ("events", .array(r.kinds.map(\.rawValue).sorted().map { .string($0) }))])
    }

    /// A Live Activity token as operators see it: whose, which kind, since when.
    static func liveActivity(_ r: LiveActivityRegistration) -> JSONValue {
        .object([("device_id", .string(r.device.rawValue)), ("app_token_id", .int(r.appTokenID)),
                 ("kind", .string(r.activityID == nil ? "start_token" : "activity")), ("activity_id", .optional(r.activityID?.rawValue)),
                 ("token", .string(r.token)), ("environment", .string(r.environment.rawValue)),
                 ("created_at", .optional(r.createdAt?.iso8601))])
    }
}
