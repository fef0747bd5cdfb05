/// TURN REST credentials as coturn's `use-auth-secret` expects them (docs/protocol.md
/// "GET /api/turn/credentials"): username `<expiry unix seconds><separator><user id>`,
/// credential base64(HMAC-SHA1(secret, username)) — the MAC itself is computed by the caller
/// (RelayCrypto). This type holds the rules: TTL clamping, user ids, times and the JSON body.
public struct TurnPolicy: Sendable {
    public let urls: [String]
    /// `stun:host:port` entries derived from the TURN URLs' hosts (one per host:port).
    public let stunURLs: [String]
    // The parts of every body that depend only on the configuration, built once.
    private let urlsJSON: JSONValue
    private let stunEntry: JSONValue?
    public var defaultTTL: Int
    public var minTTL: Int
    public var maxTTL: Int
    public var separator: String

    public init(urls: [String], defaultTTL: Int, minTTL: Int, maxTTL: Int, separator: String) {
        // UDP first: it is what WebRTC prefers and what most clients try in order.
        self.urls = urls.enumerated().sorted { a, b in
            let ua = a.element.contains("transport=udp"), ub = b.element.contains("transport=udp")
            return ua != ub ? ua : a.offset < b.offset
        }.map(\.element)
        stunURLs = TurnPolicy.stunURLs(for: self.urls)
        urlsJSON = .array(self.urls.map(JSONValue.string))
        stunEntry = stunURLs.isEmpty ? nil : .object([("urls", .array(stunURLs.map(JSONValue.string)))])
        self.defaultTTL = defaultTTL
        self.minTTL = minTTL
        self.maxTTL = maxTTL
        self.separator = separator
    }

    /// `?ttl=` clamped to [minTTL, maxTTL]; absent or unparsable means the default (clamped too).
    public func clampTTL(_ requested: String?) -> Int {
        let wanted = requested.flatMap { Int($0) } ?? defaultTTL
        return min(max(wanted, minTTL), maxTTL)
    }

    /// Coturn-safe user ids: a robot's is its device id (already `[A-Za-z0-9_.-]`) and the role;
    /// an app's names the member, `<device_id>/<token_id>` (docs/protocol.md v1.3), so coturn's `ps`
    /// finds exactly that member's sessions.
    public func userID(device: DeviceID, role: Role, tokenID: Int64?) -> String {
        if role == .app, let tokenID { return "\(device.rawValue)/\(tokenID)" }
        return "\(device.rawValue).\(role.rawValue)"
    }

    /// `ttl` cut so the credential expires no later than `end` (a member's `until`; docs/protocol.md
    /// v1.3: even below the minimum TTL). Nil when `end` has passed.
    public func ttl(_ ttl: Int, endingBy end: UnixTime?, issuedAt: UnixTime) -> Int? {
        guard let end else { return ttl }
        let left = (end.microseconds - UnixTime(seconds: issuedAt.seconds).microseconds) / 1_000_000
        guard left > 0 else { return nil }
        return min(ttl, Int(left))
    }

    /// A credential's times: expiry = issue + ttl, refresh at issue + ttl/2.
    public struct Times: Sendable, Equatable {
        public var issuedAt: UnixTime
        public var expiresAt: UnixTime
        public var refreshAt: UnixTime
        public var ttl: Int
    }

    public func times(issuedAt: UnixTime, ttl: Int) -> Times {
        let issued = UnixTime(seconds: issuedAt.seconds)
        return Times(issuedAt: issued, expiresAt: issued.adding(seconds: Int64(ttl)),
                     refreshAt: issued.adding(seconds: Int64(ttl / 2)), ttl: ttl)
    }

    public func username(userID: String, times: Times) -> String { "\(times.expiresAt.seconds)\(separator)\(userID)" }

    private static func stunURLs(for urls: [String]) -> [String] {
        var seen: [String] = []
        for url in urls where url.hasPrefix("turn:") {
            let rest = url.dropFirst(5)
            let hostPort = rest.split(separator: "?", maxSplits: 1).first.map(String.init) ?? String(rest)
            let stun = "stun:" + hostPort
            if !seen.contains(stun) { seen.append(stun) }
        }
        return seen
    }

    /// The endpoint's JSON body (also the `data` of the `turn_credentials` push).
    public func body(username: String, credential: String, times: Times) -> JSONValue {
        var ice: [JSONValue] = []
        if let stunEntry { ice.append(stunEntry) }
        ice.append(.object([("urls", urlsJSON), ("username", .string(username)), ("credential", .string(credential))]))
        return .object([
            ("urls", urlsJSON),
            ("username", .string(username)),
            ("credential", .string(credential)),
            ("ttl", .int(Int64(times.ttl))),
            ("expires_at", .string(times.expiresAt.iso8601)),
            ("refresh_at", .string(times.refreshAt.iso8601)),
            ("ice_servers", .array(ice)),
        ])
    }
}
