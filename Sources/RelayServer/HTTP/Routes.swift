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
    /// Who may call a route and what answers it, together: the handler's kind follows from the
    /// caller the router lets through, so a row cannot name a handler its caller can't reach.
    enum Kind: Sendable, Equatable {
        /// Anyone.
        case open(Open)
        /// The admin token only. Hidden: to anyone else its paths and methods do not exist
        /// (401/404 alike, whether the path is a route or not; see `Routes.resolve`).
        case admin(Admin)
        /// A robot or app token of the path's device (where the path names one), of `access`.
        case token(Access, Device)
    }

    /// The tokens a token route takes; the router checks it before the handler runs (and, for a
    /// request with a body, before the body is read).
    enum Access: String, Sendable {
        case robotOrApp = "robot_or_app"
        case robot, app
        /// An app token whose access is `owner` (docs/protocol.md v1.3); another app token: 403 `forbidden`.
        case owner
        /// An owner's or family member's app token (v1.3 "list the household").
        case household
    }

    enum Open: Sendable, Equatable { case healthz, readyz, metrics, redeemPairingCode }

    enum Admin: Sendable, Equatable {
        /// Answered by the database worker (`AdminAPI`).
        case endpoint(AdminAPI.Endpoint)
        /// The cluster's presence of a device, merged with this node's.
        case presence
    }

    enum Device: Sendable, Equatable {
        case turnCredentials, deviceStatus, deviceState, robotHTTP
        case mintPairingCode, listAppTokens, revokeAppToken
        case registerPush, listPush, removePush
        /// v1.4: the Live Activity tokens (`LiveActivityEndpoint`).
        case liveActivity(LiveActivityCall)
        case household(Household)
        /// v1.5: the sealed household's keys and epochs (`SealedEndpoint`).
        case sealed(Sealed)
        /// v1.6: the robot's settings (`SettingsEndpoint`).
        case settings(SettingsCall)
        /// v1.6: the household's timeline (`TimelineEndpoint`).
        case timeline(TimelineCall)
    }

    /// The timeline's routes (docs/protocol.md v1.6), answered by `TimelineEndpoint`.
    enum TimelineCall: Sendable, Equatable { case read, erase, readSettings, writeSettings }

    /// The settings routes (docs/protocol.md v1.6), answered by `SettingsEndpoint`.
    enum SettingsCall: Sendable, Equatable { case read, write }

    /// The sealed household's routes (docs/protocol.md v1.5), answered by `SealedEndpoint`.
    enum Sealed: Sendable, Equatable {
        case status, putMemberKey, listMembers, putEpoch, getEpoch, proposeRoster, pendingRosters
        /// v1.6: an owner shares earlier history with a family member.
        case putHistory
    }

    /// The Live Activity routes (docs/protocol.md v1.4), answered by `LiveActivityEndpoint`.
    enum LiveActivityCall: Sendable, Equatable {
        case putStartToken, removeStartToken, putActivity, removeActivity, list
    }

    /// The household's routes (docs/protocol.md v1.3), answered by `HouseholdEndpoint`.
    enum Household: Sendable, Equatable {
        case createInvite, listInvites, cancelInvite, listMembers, updateMember, removeMember
    }

    /// The largest body a route reads.
    enum BodyLimit: Sendable, CaseIterable {
        /// 64 KiB (`HTTPGate.bodyLimit`).
        case standard
        /// `WIMZ_ROBOT_HTTP_MAX_BODY`.
        case robotHTTP

        /// The limit in bytes under `configuration`.
        func bytes(_ configuration: RelayConfiguration) -> Int {
            switch self {
            case .standard: HTTPGate.bodyLimit
            case .robotHTTP: configuration.robotHTTPMaxBody
            }
        }

        /// The largest body any route reads under `configuration` (what a lingering close must
        /// be able to drop).
        static func largest(_ configuration: RelayConfiguration) -> Int {
            allCases.map { $0.bytes(configuration) }.max() ?? HTTPGate.bodyLimit
        }
    }

    let methods: [String]
    let pattern: String
    let kind: Kind
    let query: [String]
    let bodyLimit: BodyLimit

    init(_ methods: [String], _ pattern: String, _ kind: Kind, query: [String] = [], bodyLimit: BodyLimit = .standard) {
        self.methods = methods
        self.pattern = pattern
        self.kind = kind
        self.query = query
        self.bodyLimit = bodyLimit
    }

    /// Whether only the admin may learn that the route exists.
    var isHidden: Bool {
        if case .admin = kind { return true }
        return false
    }
}

extension Route.Device {
    /// The refusal of a token of the other role, in the words of the route.
    func wrongRoleMessage(_ access: Route.Access) -> String {
        switch self {
        case .robotHTTP: return "HTTP to the robot takes an app token"
        case .registerPush, .listPush, .removePush: return "push registrations take an app token"
        case .liveActivity: return "Live Activity tokens take an app token"
        case .household: return "the household is managed with an app token"
        case .sealed(.putEpoch), .sealed(.pendingRosters): return "this call takes the robot's token"
        case .sealed: return "member keys and epochs take an app token"
        case .settings: return "settings are written with an app token"
        case .timeline: return "the timeline is read with an app token"
        case .turnCredentials, .deviceStatus, .deviceState, .mintPairingCode, .listAppTokens, .revokeAppToken:
            return access == .robot ? "this call takes the robot's token" : "this call takes an app token"
        }
    }
}

extension Route {

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
    /// The protocol's paths: a device's resources are `Paths.devicePattern(…)` (`/api/devices/{device_id}/…`).
    private typealias Paths = WimzProtocol.Path

    static let table: [Route] = [
        Route(["GET", "HEAD"], "/healthz", .open(.healthz)),
        Route(["GET", "HEAD"], "/readyz", .open(.readyz)),
        Route(["GET"], "/metrics", .open(.metrics)),
        Route(["GET"], Paths.turnCredentials, .token(.robotOrApp, .turnCredentials), query: ["ttl"]),
        Route(["GET"], Paths.devicePattern(.status), .token(.robotOrApp, .deviceStatus)),
        // The robot's last-known state (docs/protocol.md v1.2).
        Route(["GET"], Paths.devicePattern(.state), .token(.robotOrApp, .deviceState)),
        // HTTP to the robot (docs/protocol.md v1.1): the path after /robot goes to the robot as sent.
        Route(RobotHTTP.methods, Paths.devicePattern(.robot), .token(.app, .robotHTTP), bodyLimit: .robotHTTP),
        Route(RobotHTTP.methods, Paths.devicePattern(.robot, ["{path+}"]), .token(.app, .robotHTTP), bodyLimit: .robotHTTP),
        // Push registrations (docs/protocol.md v1.2).
        Route(["PUT"], Paths.devicePattern(.push), .token(.app, .registerPush)),
        Route(["GET"], Paths.devicePattern(.push), .token(.app, .listPush)),
        Route(["DELETE"], Paths.devicePattern(.push, ["{token}"]), .token(.app, .removePush)),
        // Live Activity tokens (docs/protocol.md v1.4).
        Route(["PUT"], Paths.devicePattern(.liveActivity, ["start-token"]), .token(.app, .liveActivity(.putStartToken))),
        Route(["DELETE"], Paths.devicePattern(.liveActivity, ["start-token"]), .token(.app, .liveActivity(.removeStartToken))),
        Route(["PUT"], Paths.devicePattern(.liveActivity, ["activities", "{activity_id}"]), .token(.app, .liveActivity(.putActivity))),
        Route(["DELETE"], Paths.devicePattern(.liveActivity, ["activities", "{activity_id}"]),
              .token(.app, .liveActivity(.removeActivity))),
        Route(["GET"], Paths.devicePattern(.liveActivity), .token(.app, .liveActivity(.list))),
        // Pairing (docs/protocol.md v1.1).
        Route(["POST"], Paths.devicePattern(.pairingCodes), .token(.robot, .mintPairingCode)),
        Route(["POST"], Paths.pairing, .open(.redeemPairingCode)),
        Route(["GET"], Paths.devicePattern(.appTokens), .token(.robot, .listAppTokens)),
        Route(["DELETE"], Paths.devicePattern(.appTokens, ["{token_id}"]), .token(.robot, .revokeAppToken)),
        // The household (docs/protocol.md v1.3).
        Route(["POST"], Paths.devicePattern(.invites), .token(.owner, .household(.createInvite))),
        Route(["GET"], Paths.devicePattern(.invites), .token(.owner, .household(.listInvites))),
        Route(["DELETE"], Paths.devicePattern(.invites, ["{invite_id}"]), .token(.owner, .household(.cancelInvite))),
        Route(["GET"], Paths.devicePattern(.members), .token(.household, .household(.listMembers))),
        Route(["PATCH"], Paths.devicePattern(.members, ["{token_id}"]), .token(.owner, .household(.updateMember))),
        Route(["DELETE"], Paths.devicePattern(.members, ["{token_id}"]), .token(.app, .household(.removeMember))),
        // The sealed household (docs/protocol.md v1.5).
        Route(["GET"], Paths.devicePattern(.sealed), .token(.robotOrApp, .sealed(.status))),
        Route(["PUT"], Paths.devicePattern(.sealed, ["member-key"]), .token(.app, .sealed(.putMemberKey))),
        Route(["GET"], Paths.devicePattern(.sealed, ["members"]), .token(.app, .sealed(.listMembers))),
        Route(["PUT"], Paths.devicePattern(.sealed, ["epochs", "{epoch}"]), .token(.robot, .sealed(.putEpoch))),
        Route(["GET"], Paths.devicePattern(.sealed, ["epochs", "{epoch}"]), .token(.app, .sealed(.getEpoch))),
        Route(["POST"], Paths.devicePattern(.sealed, ["rosters"]), .token(.owner, .sealed(.proposeRoster))),
        Route(["GET"], Paths.devicePattern(.sealed, ["rosters"]), .token(.robot, .sealed(.pendingRosters))),
        Route(["PUT"], Paths.devicePattern(.sealed, ["history", "{kid}"]), .token(.owner, .sealed(.putHistory))),
        // The robot's settings (docs/protocol.md v1.6).
        Route(["GET"], Paths.devicePattern(.settings), .token(.robotOrApp, .settings(.read))),
        Route(["PUT"], Paths.devicePattern(.settings), .token(.app, .settings(.write))),
        // The household's timeline (docs/protocol.md v1.6).
        Route(["GET"], Paths.devicePattern(.timeline), .token(.app, .timeline(.read)), query: ["limit", "before", "after", "events"]),
        Route(["DELETE"], Paths.devicePattern(.timeline), .token(.owner, .timeline(.erase))),
        Route(["GET"], Paths.devicePattern(.timeline, ["settings"]), .token(.robotOrApp, .timeline(.readSettings))),
        Route(["PUT"], Paths.devicePattern(.timeline, ["settings"]), .token(.owner, .timeline(.writeSettings))),
        // The admin API (AdminAPI.swift answers them on the database worker).
        Route(["GET"], "/admin/devices", .admin(.endpoint(.listDevices))),
        Route(["POST"], "/admin/devices", .admin(.endpoint(.addDevice))),
        Route(["GET"], "/admin/devices/{id}", .admin(.endpoint(.device))),
        Route(["POST"], "/admin/devices/{id}/disable", .admin(.endpoint(.disableDevice))),
        Route(["POST"], "/admin/devices/{id}/enable", .admin(.endpoint(.enableDevice))),
        Route(["POST"], "/admin/devices/{id}/tokens", .admin(.endpoint(.issueToken))),
        Route(["POST"], "/admin/devices/{id}/pairing-codes", .admin(.endpoint(.mintPairingCode))),
        Route(["GET"], "/admin/devices/{id}/presence", .admin(.presence)),
        Route(["GET"], "/admin/devices/{id}/push", .admin(.endpoint(.pushRegistrations))),
        Route(["GET"], "/admin/devices/{id}/live-activities", .admin(.endpoint(.liveActivities))),
        Route(["GET"], "/admin/tokens", .admin(.endpoint(.listTokens)), query: ["device_id"]),
        Route(["GET"], "/admin/devices/{id}/members", .admin(.endpoint(.members))),
        Route(["POST"], "/admin/tokens/{id}/revoke", .admin(.endpoint(.revokeToken))),
        Route(["GET"], "/admin/turn-secrets", .admin(.endpoint(.turnSecrets)), query: ["realm"]),
        Route(["POST"], "/admin/turn-secrets/rotate", .admin(.endpoint(.rotateTurnSecret)), query: ["realm"]),
        Route(["GET"], "/admin/audit", .admin(.endpoint(.audit)), query: ["device_id", "from", "to", "after", "limit"]),
        Route(["GET"], "/admin/cluster/nodes", .admin(.endpoint(.clusterNodes))),
    ]

    enum Resolution {
        case found(Route, parameters: [String: String])
        /// The path exists with other methods (405, `Allow`); `hidden`: only hidden routes have it.
        case methodNotAllowed(allowed: [String], hidden: Bool)
        /// No route; `hidden`: the path lies where hidden routes are (under their first segment,
        /// `/admin/`), so only the admin may learn that it is no route.
        case notFound(hidden: Bool)
    }

    /// The first path segments of the hidden routes.
    private static let hiddenScopes = Set(table.filter(\.isHidden).compactMap { $0.pattern.split(separator: "/").first })

    /// The route for `method` on `rawPath` (the path as sent, still percent-encoded).
    static func resolve(method: String, rawPath: String) -> Resolution {
        let segments = rawPath.split(separator: "/", omittingEmptySubsequences: false).dropFirst()
        var allowed: [String] = []
        var hidden = false
        for route in table {
            guard let parameters = route.match(Array(segments)) else { continue }
            if route.methods.contains(method) { return .found(route, parameters: parameters) }
            allowed += route.methods.filter { !allowed.contains($0) }
            hidden = hidden || route.isHidden
        }
        if !allowed.isEmpty { return .methodNotAllowed(allowed: allowed, hidden: hidden) }
        return .notFound(hidden: segments.first.map { hiddenScopes.contains($0) } ?? false)
    }
}
