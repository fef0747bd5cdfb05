import RelayCore

/// Every HTTP route the relay serves, in one table: method, path pattern (OpenAPI's, as in
/// docs/openapi.json), who may call it, the query arguments it reads, and its handler. Dispatch,
/// 404, 405 with `Allow`, the admin API's query arguments and the check against the OpenAPI
/// document (RoutesTests) all read this table, so a new endpoint is one row here, its handler,
/// and its OpenAPI entry.
///
/// Patterns: `{name}` is one non-empty path segment (percent-decoded), a final `{path+}` the rest
/// (one or more segments, as sent). Matching runs on the path as sent, split at `/`.
struct Route: Sendable {
    /// Who may call a route. The handler checks it (the table says it, for readers and the
    /// OpenAPI check).
    enum Auth: String, Sendable {
        case none, admin
        case robotOrApp = "robot_or_app"
        case robot, app
    }

    enum Handler: Sendable {
        case healthz, readyz, metrics, turnCredentials, deviceStatus, deviceState, robotHTTP
        case mintPairingCode, redeemPairingCode, listAppTokens, revokeAppToken
        case pushRegistrations, pushRegistration
        /// Answered by the database worker (AdminAPI), by pattern.
        case admin
        case adminPresence
    }

    let methods: [String]
    let pattern: String
    let auth: Auth
    let query: [String]
    let handler: Handler

    init(_ methods: [String], _ pattern: String, _ auth: Auth, query: [String] = [], _ handler: Handler) {
        self.methods = methods
        self.pattern = pattern
        self.auth = auth
        self.query = query
        self.handler = handler
    }

    /// The path parameters of `segments` (raw) when they match this route's pattern.
    func match(_ segments: [Substring]) -> [String: String]? {
        let want = pattern.split(separator: "/", omittingEmptySubsequences: false).dropFirst()
        var parameters: [String: String] = [:]
        for (k, part) in want.enumerated() {
            if part == "{path+}" {
                // The rest as it is (empty segments too: `/robot/` is the robot's `/`).
                return segments.count > k ? parameters : nil
            }
            guard k < segments.count else { return nil }
            if part.hasPrefix("{") {
                guard !segments[k].isEmpty else { return nil }
                let raw = Array(segments[k].utf8)
                parameters[String(part.dropFirst().dropLast())] =
                    (try? HTTPRequestHead.percentDecode(raw[...], what: "the path")) ?? String(segments[k])
            } else if part != segments[k] {
                return nil
            }
        }
        return segments.count == want.count ? parameters : nil
    }
}

enum Routes {
    static let table: [Route] = [
        Route(["GET", "HEAD"], "/healthz", .none, .healthz),
        Route(["GET", "HEAD"], "/readyz", .none, .readyz),
        Route(["GET"], "/metrics", .none, .metrics),
        Route(["GET"], "/api/turn/credentials", .robotOrApp, query: ["ttl"], .turnCredentials),
        Route(["GET"], "/api/devices/{device_id}/status", .robotOrApp, .deviceStatus),
        // The robot's last-known state (PROTOCOL.md v1.2).
        Route(["GET"], "/api/devices/{device_id}/state", .robotOrApp, .deviceState),
        // HTTP to the robot (PROTOCOL.md v1.1): the path after /robot goes to the robot as sent.
        Route(RobotHTTP.methods, "/api/devices/{device_id}/robot", .app, .robotHTTP),
        Route(RobotHTTP.methods, "/api/devices/{device_id}/robot/{path+}", .app, .robotHTTP),
        // Push registrations (PROTOCOL.md v1.2).
        Route(["GET", "PUT"], "/api/devices/{device_id}/push", .app, .pushRegistrations),
        Route(["DELETE"], "/api/devices/{device_id}/push/{token}", .app, .pushRegistration),
        // Pairing (PROTOCOL.md v1.1).
        Route(["POST"], "/api/devices/{device_id}/pairing-codes", .robot, .mintPairingCode),
        Route(["POST"], "/api/pairing", .none, .redeemPairingCode),
        Route(["GET"], "/api/devices/{device_id}/app-tokens", .robot, .listAppTokens),
        Route(["DELETE"], "/api/devices/{device_id}/app-tokens/{token_id}", .robot, .revokeAppToken),
        // The admin API (AdminAPI.swift answers them on the database worker).
        Route(["GET", "POST"], "/admin/devices", .admin, .admin),
        Route(["GET"], "/admin/devices/{id}", .admin, .admin),
        Route(["POST"], "/admin/devices/{id}/disable", .admin, .admin),
        Route(["POST"], "/admin/devices/{id}/enable", .admin, .admin),
        Route(["POST"], "/admin/devices/{id}/tokens", .admin, .admin),
        Route(["POST"], "/admin/devices/{id}/pairing-codes", .admin, .admin),
        Route(["GET"], "/admin/devices/{id}/presence", .admin, .adminPresence),
        Route(["GET"], "/admin/devices/{id}/push", .admin, .admin),
        Route(["GET"], "/admin/tokens", .admin, query: ["device_id"], .admin),
        Route(["POST"], "/admin/tokens/{id}/revoke", .admin, .admin),
        Route(["GET"], "/admin/turn-secrets", .admin, query: ["realm"], .admin),
        Route(["POST"], "/admin/turn-secrets/rotate", .admin, query: ["realm"], .admin),
        Route(["GET"], "/admin/audit", .admin, query: ["device_id", "from", "to", "after", "limit"], .admin),
        Route(["GET"], "/admin/cluster/nodes", .admin, .admin),
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
