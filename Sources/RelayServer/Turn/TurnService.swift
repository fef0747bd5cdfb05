import RelayCore
import RelayCrypto

/// Mints TURN credentials on the service thread: the signing secret is the newest one of the
/// realm (from the store monitor) or the static one from the configuration.
final class TurnService {
    let policy: TurnPolicy
    let staticSecret: String?
    /// Database secrets, newest first; only the first signs.
    private(set) var secrets: [TurnSecret] = []
    private var limiter: KeyedRateLimiter<Int64>
    /// The signing secret's MAC context, rebuilt when the signing secret changes.
    private var signer: (secret: String, key: HMACSHA1Key)?

    // Counters (exported by /metrics).
    var issued = 0
    var pushed = 0

    init(configuration: RelayConfiguration) {
        policy = TurnPolicy(urls: configuration.turnURLs, defaultTTL: configuration.turnTTL, minTTL: configuration.turnTTLMin,
                            maxTTL: configuration.turnTTLMax, separator: configuration.turnUsernameSeparator)
        staticSecret = configuration.turnStaticSecret
        limiter = KeyedRateLimiter(rate: configuration.turnRequestRate, burst: configuration.turnRequestBurst)
    }

    func update(secrets: [TurnSecret]) { self.secrets = secrets }

    /// Whether credentials can be minted at all (a secret and at least one URL).
    var isAvailable: Bool { !policy.urls.isEmpty && signingSecret != nil }

    private var signingSecret: (value: String, id: Int64?)? {
        if let newest = secrets.first { return (newest.value, newest.id) }
        return staticSecret.map { ($0, nil) }
    }

    private func signingKey(_ secret: String) -> HMACSHA1Key {
        if let signer, signer.secret == secret { return signer.key }
        let key = HMACSHA1Key(Array(secret.utf8))
        signer = (secret, key)
        return key
    }

    /// Per-token request limit for the HTTP endpoint.
    func allowRequest(tokenID: Int64, now: UInt64) -> Bool { limiter.allow(tokenID, now: now) }

    /// Forgets idle limiters (called from the 1 s tick).
    func sweepLimiters(now: UInt64) { limiter.sweep(now: now) }

    /// A fresh credential: the JSON body, its times and the issuance record.
    func issue(device: DeviceID, role: Role, tokenID: Int64?, ttl: Int, clientAddress: String?, via: String,
               now: UnixTime) -> (body: JSONValue, times: TurnPolicy.Times, issuance: TurnIssuance)? {
        guard !policy.urls.isEmpty, let secret = signingSecret else { return nil }
        let times = policy.times(issuedAt: now, ttl: ttl)
        let userID = policy.userID(device: device, role: role, tokenID: tokenID)
        let username = policy.username(userID: userID, times: times)
        let credential = Base64.encode(signingKey(secret.value).mac(Array(username.utf8)))
        issued += 1
        let issuance = TurnIssuance(deviceID: device, tokenID: tokenID, role: role, userID: userID, username: username,
                                    secretID: secret.id, issuedAt: times.issuedAt, expiresAt: times.expiresAt,
                                    clientAddress: clientAddress, via: via)
        return (policy.body(username: username, credential: credential, times: times), times, issuance)
    }
}
