import Foundation
import RelayCore
import RelayStore

/// The admin API's handlers. They run on the database worker thread (never the service
/// thread) and turn a request into a status and a JSON body. Routes and shapes are described
/// in docs/openapi.json.
enum AdminAPI {
    struct Request: Sendable {
        var method: String
        var path: String
        /// The route's pattern in `Routes.table` (`/admin/devices/{id}/tokens`) and its `{id}`.
        var pattern = ""
        var id: String?
        var query: [String: String]
        var body: [UInt8]
        var remoteAddress: String
    }

    struct Failure: Error {
        var status: Int
        var code: String
        var message: String
    }

    static let actor = "admin-api"

    /// Dispatches one request. Throws `Failure` for client errors; store errors are mapped too.
    /// The router (`Routes.table`) matched the request: this picks the handler by the route's
    /// pattern and method.
    static func handle(_ r: Request, db: PGConnection) throws -> (Int, JSONValue) {
        /// The `{id}` (if any) when `method` and `pattern` (after `/admin/`) are the request's route.
        func match(_ method: String, _ pattern: String) -> [String]? {
            guard r.method == method, r.pattern == "/admin/" + pattern else { return nil }
            return r.id.map { [$0] } ?? []
        }
        do {
            if match("GET", "devices") != nil {
                let online = try ClusterRepository(db).presence(of: nil)
                return (200, .object([("devices", .array(try DeviceRepository(db).list().map {
                    device($0, online: online[$0.id]?.online ?? false)
                }))]))
            } else if match("POST", "devices") != nil {
                let body = try json(r.body)
                guard let idText = body["id"] as? String, let id = DeviceID(idText) else {
                    throw Failure(status: 400, code: "bad_request", message: "id must match [A-Za-z0-9_.-]{1,64}")
                }
                return (201, device(try DeviceRepository(db).add(id, name: try decode(NewDevice.self, r.body).name ?? "",
                                                                 actor: actor)))
            } else if let id = match("GET", "devices/{id}")?[0] {
                guard let record = try DeviceRepository(db).get(try deviceID(id)) else {
                    throw Failure(status: 404, code: "not_found", message: "unknown device \(id)")
                }
                let online = try ClusterRepository(db).presence(of: [record.id])[record.id]?.online ?? false
                return (200, device(record, online: online))
            } else if let id = match("GET", "devices/{id}/push")?[0] {
                let registrations = try PushRepository(db).registrations(device: try deviceID(id))
                return (200, .object([("registrations", .array(registrations.map(pushRegistration)))]))
            } else if match("GET", "cluster/nodes") != nil {
                return (200, .object([("nodes", .array(try ClusterRepository(db).nodes().map(node)))]))
            } else if let id = (match("POST", "devices/{id}/disable") ?? match("POST", "devices/{id}/enable"))?[0] {
                let disable = r.pattern.hasSuffix("/disable")
                return (200, device(try DeviceRepository(db).setDisabled(try deviceID(id), disable, actor: actor).device))
            } else if let id = match("POST", "devices/{id}/tokens")?[0] {
                let body = try json(r.body)
                guard let roleText = body["role"] as? String, let role = Role(rawValue: roleText) else {
                    throw Failure(status: 400, code: "bad_request", message: "role must be robot or app")
                }
                let typed = try decode(NewToken.self, r.body)
                if let e = typed.expires_in, !(1...maxTokenLifetime).contains(e) {
                    throw Failure(status: 400, code: "bad_request", message: "expires_in must be from 1 to \(maxTokenLifetime) seconds")
                }
                let issued = try TokenRepository(db).issue(device: try deviceID(id), role: role, label: typed.label ?? "",
                                                           expiresIn: typed.expires_in, actor: actor)
                return (201, .object([("token", token(issued.record)), ("secret", .string(issued.secret))]))
            } else if let id = match("POST", "devices/{id}/pairing-codes")?[0] {
                let ttl = try decode(NewPairingCode.self, r.body.isEmpty ? Array("{}".utf8) : r.body).expires_in ?? 600
                guard (30...86_400).contains(ttl) else {
                    throw Failure(status: 400, code: "bad_request", message: "expires_in must be from 30 to 86400 seconds")
                }
                let minted = try PairingRepository(db).create(device: try deviceID(id), ttl: ttl, actor: actor, address: r.remoteAddress)
                return (201, .object([("code", .string(minted.code)), ("expires_at", .string(minted.expiresAt.iso8601)),
                                      ("expires_in", .int(Int64(minted.expiresIn)))]))
            } else if match("GET", "tokens") != nil {
                let device = try r.query["device_id"].map(deviceID)
                return (200, .object([("tokens", .array(try TokenRepository(db).list(device: device).map(token)))]))
            } else if let idText = match("POST", "tokens/{id}/revoke")?[0] {
                guard let id = Int64(idText) else { throw Failure(status: 400, code: "bad_request", message: "token id must be a number") }
                return (200, token(try TokenRepository(db).revoke(id: id, actor: actor).token))
            } else if match("GET", "turn-secrets") != nil {
                let realm = try Self.realm(r.query["realm"] ?? "wimz")
                let secrets = try TurnRepository(db).secrets(realm: realm)
                return (200, .object([("secrets", .array(secrets.enumerated().map { secret($1, signing: $0 == 0) }))]))
            } else if match("POST", "turn-secrets/rotate") != nil {
                let realm = try Self.realm((try? json(r.body))?["realm"] as? String ?? r.query["realm"] ?? "wimz")
                return (201, secret(try TurnRepository(db).add(realm: realm, value: nil, actor: actor, kind: .turnSecretRotated),
                                    signing: true))
            } else if match("GET", "audit") != nil {
                guard let limit = Int(r.query["limit"] ?? "100"), (1...1000).contains(limit) else {
                    throw Failure(status: 400, code: "bad_request", message: "limit must be an integer from 1 to 1000")
                }
                guard let after = Int64(r.query["after"] ?? "0"), after >= 0 else {
                    throw Failure(status: 400, code: "bad_request", message: "after must be a non-negative integer")
                }
                func time(_ key: String) throws -> UnixTime? {
                    guard let text = r.query[key] else { return nil }
                    guard let t = UnixTime(iso8601: text) else {
                        throw Failure(status: 400, code: "bad_request", message: "\(key) must be an ISO 8601 time")
                    }
                    return t
                }
                let entries = try AuditRepository(db).query(deviceID: try r.query["device_id"].map(deviceID)?.rawValue,
                                                            from: try time("from"), to: try time("to"),
                                                            afterSequence: after, limit: limit)
                return (200, .object([("entries", .array(entries.map(audit))),
                                      ("next_after", entries.count == limit ? .int(entries.last!.sequence) : .null)]))
            } else {
                throw Failure(status: 404, code: "not_found", message: "no such admin endpoint")
            }
        } catch let error as StoreError where error.kind == .conflict {
            let notFound = error.message.hasPrefix("unknown")
            throw Failure(status: notFound ? 404 : 409, code: notFound ? "not_found" : "conflict", message: error.message)
        }
    }

    static func json(_ body: [UInt8]) throws -> [String: Any] {
        guard !body.isEmpty, let object = try? JSONSerialization.jsonObject(with: Data(body)) as? [String: Any] else {
            throw Failure(status: 400, code: "invalid_json", message: "the body must be a JSON object")
        }
        return object
    }

    /// A TURN realm: `[A-Za-z0-9_.-]{1,64}`, like the device ids (coturn takes it in its config).
    static func realm(_ text: String) throws -> String {
        guard DeviceID(text) != nil else {
            throw Failure(status: 400, code: "bad_request", message: "realm must match [A-Za-z0-9_.-]{1,64}")
        }
        return text
    }

    // The optional members of request bodies, type-checked (a label of {} is a 400, not "").
    protocol TextMembers { var texts: [String] { get } }
    struct NewDevice: Decodable, TextMembers {
        var name: String?
        var texts: [String] { [name ?? ""] }
    }
    struct NewToken: Decodable, TextMembers {
        var label: String?
        var expires_in: Int64?
        var texts: [String] { [label ?? ""] }
    }

    struct NewPairingCode: Decodable, TextMembers {
        var expires_in: Int?
        var texts: [String] { [] }
    }

    /// The longest token lifetime the API issues (ten years), far inside PostgreSQL's time range.
    static let maxTokenLifetime: Int64 = 10 * 366 * 86_400

    static func decode<T: Decodable & TextMembers>(_ type: T.Type, _ body: [UInt8]) throws -> T {
        let value: T
        do {
            value = try JSONDecoder().decode(type, from: Data(body))
        } catch {
            throw Failure(status: 400, code: "bad_request", message: "a body member has the wrong type")
        }
        // PostgreSQL text cannot hold NUL, and names end up in logs and listings.
        for text in value.texts where text.unicodeScalars.contains(where: { $0.value < 0x20 || $0.value == 0x7F }) {
            throw Failure(status: 400, code: "bad_request", message: "names and labels must not contain control characters")
        }
        return value
    }

    static func deviceID(_ text: String) throws -> DeviceID {
        guard let id = DeviceID(text) else { throw Failure(status: 400, code: "bad_request", message: "invalid device id") }
        return id
    }

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

    static func token(_ t: TokenRecord) -> JSONValue {
        let status = t.revokedAt != nil ? "revoked" : t.isExpired(at: .now()) ? "expired" : "active"
        return .object([("id", .int(t.id)), ("device_id", .string(t.deviceID.rawValue)), ("role", .string(t.role.rawValue)),
                        ("label", .string(t.label)), ("status", .string(status)), ("created_at", .string(t.createdAt.iso8601)),
                        ("expires_at", .optional(t.expiresAt?.iso8601)), ("revoked_at", .optional(t.revokedAt?.iso8601)),
                        ("last_used_at", .optional(t.lastUsedAt?.iso8601))])
    }

    static func secret(_ s: TurnSecret, signing: Bool) -> JSONValue {
        .object([("id", .int(s.id)), ("realm", .string(s.realm)), ("secret_masked", .string(s.masked)),
                 ("created_at", .string(s.createdAt.iso8601)), ("signing", .bool(signing))])
    }

    static func audit(_ e: AuditRepository.Entry) -> JSONValue {
        .object([("sequence", .int(e.sequence)), ("id", .string(e.event.id)), ("at", .string(e.event.at.iso8601)),
                 ("event", .string(e.event.kind.rawValue)), ("actor", .string(e.event.actor)),
                 ("device_id", .optional(e.event.deviceID)), ("token_id", e.event.tokenID.map { .int($0) } ?? .null),
                 ("remote_addr", .optional(e.event.remoteAddress)), ("details", .raw(e.detailsJSON))])
    }

    /// A push registration as operators see it: whose (the app token's id) and what for.
    static func pushRegistration(_ r: PushRegistration) -> JSONValue {
        .object([("device_id", .string(r.device.rawValue)), ("token", .string(r.token)), ("environment", .string(r.environment.rawValue)),
                 ("app_token_id", .int(r.appTokenID)), ("events", .array(r.kinds.map(\.rawValue).sorted().map { .string($0) }))])
    }
}
