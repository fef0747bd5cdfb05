import RelayCore
import WimzProtocol

/// Every HTTP route the relay serves, in one table: method, path pattern (OpenAPI's, as in
/// docs/openapi.json), who may call it, the query arguments it reads, its body limit and its
/// handler. The router enforces `auth` (the handler gets the caller) and dispatches once; 404,
/// 405 with `Allow`, the admin API's query arguments and the check against the OpenAPI document
/// (RoutesTests) all read this table, so a new endpoint is one row here, its handler, and its
/// OpenAPI entry.
///
/// Patterns: `{name}` is one non-empty path segment (percent-decoded), a final `{path+}` the rest
/// (one or more segments, as sent). Matching runs on the path as sent, split at `/`.
struct Route: Sendable {
    /// Who may call a route: the router checks it before the handler runs (and, for a request
    /// with a body, before the body is read).
    enum Auth: String, Sendable {
        case none, admin
        case robotOrApp = "robot_or_app"
        case robot, app
        /// An app token whose access is `owner` (docs/protocol.md v1.3); another app token: 403 `forbidden`.
        case owner
        /// An owner's or family member's app token (v1.3 "list the household").
        case household
    }

    enum Handler: Sendable, Equatable {
        case healthz, readyz, metrics, turnCredentials, deviceStatus, deviceState, robotHTTP
        case mintPairingCode, redeemPairingCode, listAppTokens, revokeAppToken
        case registerPush, listPush, removePush
        case createInvite, listInvites, cancelInvite, listMembers, updateMember, removeMember
        /// Answered by the database worker (`AdminAPI`).
        case admin(AdminAPI.Endpoint)
        case adminPresence
    }

    /// The largest body a route reads.
    enum BodyLimit: Sendable {
        /// 64 KiB (`HTTPGate.bodyLimit`).
        case standard
        /// `WIMZ_ROBOT_HTTP_MAX_BODY`.
        case robotHTTP
    }

    let methods: [String]
    let pattern: String
    let auth: Auth
    let query: [String]
    let bodyLimit: BodyLimit
    let handler: Handler

    init(_ methods: [String], _ pattern: String, _ auth: Auth, query: [String] = [], bodyLimit: BodyLimit = .standard,
         _ handler: Handler) {
        self.methods = methods
        self.pattern = pattern
        self.auth = auth
        self.query = query
        self.bodyLimit = bodyLimit
        self.handler = handler
    }

    /// The refusal of a token of the other role, in the words of the route.
    var wrongRoleMessage: String {
        switch handler {
        case .robotHTTP: return "HTTP to the robot takes an app token"
        case .registerPush, .listPush, .removePush: return "push registrations take an app token"
        case .createInvite, .listInvites, .cancelInvite, .listMembers, .updateMember, .removeMember:
            return "the household is managed with an app token"
        default: return auth == .robot ? "this call takes the robot's token" : "this call takes an app token"
        }
    }

    /// The path parameters of `segments` (raw) when they match this route's pattern.
    func match(_ segments: [Substring]) -> [String: String]? {
        let want = pattern.split(separator: "/", omittingEmptySubsequences: false).dropFirst()
        var parameters: [String: String] = [:]
        for (k, part) in want.enumerated() {
            if part == "{path+}" {
                // The rest as sent (empty segments too: `/robot/` is the robot's `/`).
                guard segments.count > k else { return nil }
                parameters["path+"] = "/" + segments[k...].joined(separator: "/")
                return parameters
            }
            guard k < segments.count else { return nil }
            if part.hasPrefix("{") {
                guard !segments[k].isEmpty else { return nil }
                let name = String(part.dropFirst().dropLast())
                let raw = Array(segments[k].utf8)
                // A device id stays as sent: the bytes the balancer hashes on (an id never needs
                // escapes, so an escaped one is refused, not decoded onto another node's device).
                parameters[name] = name == "device_id" ? String(segments[k])
                    : (try? HTTPRequestHead.percentDecode(raw[...], what: "the path")) ?? String(segments[k])
            } else if part != segments[k] {
                return nil
            }
        }
        return segments.count == want.count ? parameters : nil
    }
}

enum Routes {
    private static let devices = WimzProtocol.Path.devices

    static let table: [Route] = [
        Route(["GET", "HEAD"], "/healthz", .none, .healthz),
        Route(["GET", "HEAD"], "/readyz", .none, .readyz),
        Route(["GET"], "/metrics", .none, .metrics),
        Route(["GET"], WimzProtocol.Path.turnCredentials, .robotOrApp, query: ["ttl"], .turnCredentials),
        Route(["GET"], devices + "/{device_id}/status", .robotOrApp, .deviceStatus),
        // The robot's last-known state (docs/protocol.md v1.2).
        Route(["GET"], devices + "/{device_id}/state", .robotOrApp, .deviceState),
        // HTTP to the robot (docs/protocol.md v1.1): the path after /robot goes to the robot as sent.
        Route(RobotHTTP.methods, devices + "/{device_id}/robot", .app, bodyLimit: .robotHTTP, .robotHTTP),
        Route(RobotHTTP.methods, devices + "/{device_id}/robot/{path+}", .app, bodyLimit: .robotHTTP, .robotHTTP),
        // Push registrations (docs/protocol.md v1.2).
        Route(["PUT"], devices + "/{device_id}/push", .app, .registerPush),
        Route(["GET"], devices + "/{device_id}/push", .app, .listPush),
        Route(["DELETE"], devices + "/{device_id}/push/{token}", .app, .removePush),
        // Pairing (docs/protocol.md v1.1).
        Route(["POST"], devices + "/{device_id}/pairing-codes", .robot, .mintPairingCode),
        Route(["POST"], WimzProtocol.Path.pairing, .none, .redeemPairingCode),
        Route(["GET"], devices + "/{device_id}/app-tokens", .robot, .listAppTokens),
        Route(["DELETE"], devices + "/{device_id}/app-tokens/{token_id}", .robot, .revokeAppToken),
        // The household (docs/protocol.md v1.3).
        Route(["POST"], devices + "/{device_id}/invites", .owner, .createInvite),
        Route(["GET"], devices + "/{device_id}/invites", .owner, .listInvites),
        Route(["DELETE"], devices + "/{device_id}/invites/{invite_id}", .owner, .cancelInvite),
        Route(["GET"], devices + "/{device_id}/members", .household, .listMembers),
        Route(["PATCH"], devices + "/{device_id}/members/{token_id}", .owner, .updateMember),
        Route(["DELETE"], devices + "/{device_id}/members/{token_id}", .app, .removeMember),
        // The admin API (AdminAPI.swift answers them on the database worker).
        Route(["GET"], "/admin/devices", .admin, .admin(.listDevices)),
        Route(["POST"], "/admin/devices", .admin, .admin(.addDevice)),
        Route(["GET"], "/admin/devices/{id}", .admin, .admin(.device)),
        Route(["POST"], "/admin/devices/{id}/disable", .admin, .admin(.disableDevice)),
        Route(["POST"], "/admin/devices/{id}/enable", .admin, .admin(.enableDevice)),
        Route(["POST"], "/admin/devices/{id}/tokens", .admin, .admin(.issueToken)),
        Route(["POST"], "/admin/devices/{id}/pairing-codes", .admin, .admin(.mintPairingCode)),
        Route(["GET"], "/admin/devices/{id}/presence", .admin, .adminPresence),
        Route(["GET"], "/admin/devices/{id}/push", .admin, .admin(.pushRegistrations)),
        Route(["GET"], "/admin/tokens", .admin, query: ["device_id"], .admin(.listTokens)),
        Route(["GET"], "/admin/devices/{id}/members", .admin, .admin(.members)),
        Route(["POST"], "/admin/tokens/{id}/revoke", .admin, .admin(.revokeToken)),
        Route(["GET"], "/admin/turn-secrets", .admin, query: ["realm"], .admin(.turnSecrets)),
        Route(["POST"], "/admin/turn-secrets/rotate", .admin, query: ["realm"], .admin(.rotateTurnSecret)),
        Route(["GET"], "/admin/audit", .admin, query: ["device_id", "from", "to", "after", "limit"], .admin(.audit)),
        Route(["GET"], "/admin/cluster/nodes", .admin, .admin(.clusterNodes)),
    ]

    enum Resolution {
        case found(Route, parameters: [String: String])
        /// The path exists with other methods (405, `Allow`).
        case methodNotAllowed(allowed: [String])
        case notFound
    }

    /// The route for `method` on `rawPath` (the path as sent, still percent-encoded).
    static func resolve(method: String, rawPath: String) -> Resolution {
        let segments = rawPath.split(separator: "/", omittingEmptySubsequences: false).dropFirst()
        var allowed: [String] = []
        for route in table {
            guard let parameters = route.match(Array(segments)) else { continue }
            if route.methods.contains(method) { return .found(route, parameters: parameters) }
            allowed += route.methods.filter { !allowed.contains($0) }
        }
        return allowed.isEmpty ? .notFound : .methodNotAllowed(allowed: allowed)
    }
}
