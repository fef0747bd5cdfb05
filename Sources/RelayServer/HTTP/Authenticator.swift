import RelayCore
import RelayCrypto

/// Who is calling: the one place bearer tokens, the admin token and the client's address are
/// read and checked, for HTTP routes and WebSocket upgrades alike. Owns the token mirror and the
/// per-address failure limit. Service thread only.
final class Authenticator {
    let credentials = CredentialTable()
    let failures = AuthFailureLimiter()
    private let configuration: RelayConfiguration
    private let clock: ServiceClock

    init(configuration: RelayConfiguration, clock: ServiceClock) {
        self.configuration = configuration
        self.clock = clock
    }

    /// The bearer token of an HTTP request (`Authorization: Bearer …` only, as the contract says).
    func bearerToken(_ request: HTTPRequest) -> String? {
        request.head.header("authorization").flatMap(Redaction.bearerToken(fromAuthorization:))
    }

    /// Bearer token → its mirror entry, with the contract's 401/503 when there is none and the
    /// credential rules (expired, revoked, disabled) checked. `wants` is the 401's message.
    func authenticate(_ request: HTTPRequest, wants: String) -> Authentication {
        guard let token = bearerToken(request) else { return .refused(.authFailure(.missingToken, message: wants)) }
        guard let entry = credentials.lookup(token: token) else {
            return .refused(credentials.isLoaded ? .authFailure(.unknownToken, message: "unknown token")
                : .authFailure(.storeUnavailable, message: "credential store unavailable; retry shortly"))
        }
        if case .failure(let failure) = CredentialRules.check(entry, at: clock.wall()) {
            return .refused(.authFailure(failure, message: failure == .deviceDisabled ? "device disabled" : "token \(failure.rawValue)"))
        }
        return .accepted(entry)
    }

    /// `authenticate`, then the token must be `role`'s for `device`. `messages` words the
    /// refusals a route words its own way (wrong role, say).
    func authenticate(_ request: HTTPRequest, device: DeviceID, role: Role, wants: String,
                      messages: [AuthFailure: String] = [:]) -> Authentication {
        let entry: CredentialEntry
        switch authenticate(request, wants: wants) {
        case .refused(let response): return .refused(response)
        case .accepted(let found): entry = found
        }
        if case .failure(let failure) = CredentialRules.authorize(entry, device: device, role: role, at: clock.wall()) {
            let message = messages[failure] ?? (failure == .wrongDevice ? "token belongs to another device" : "token \(failure.rawValue)")
            return .refused(.authFailure(failure, message: message))
        }
        return .accepted(entry)
    }

    /// The admin API answers 404 while it is disabled and 401 without its token, before it
    /// says which of its paths and methods exist. Nil: the token is good.
    func adminRefusal(_ request: HTTPRequest) -> HTTPResponse? {
        guard let adminToken = configuration.adminToken else {
            return .error(404, "not_found", "the admin API is disabled (set WIMZ_ADMIN_TOKEN)")
        }
        // Hash both sides so the comparison's time depends on neither length nor content.
        guard let presented = bearerToken(request),
              Crypto.constantTimeEquals(Crypto.sha256(presented), Crypto.sha256(adminToken))
        else { return .authFailure(.unknownToken, message: "admin token required") }
        return nil
    }

    /// The client's address: the peer, or — only when the peer is a trusted proxy — the
    /// right-most `X-Forwarded-For` entry that is not itself a trusted proxy.
    func clientAddress(_ request: HTTPRequest) -> String {
        let peer = request.peerAddress
        guard configuration.trustedProxies.contains(peer),
              let forwarded = request.head.header("x-forwarded-for"), forwarded.utf8.count <= 1024 else { return peer }
        let hops = forwarded.split(separator: ",").map { String($0.filter { $0 != " " }) }
        for hop in hops.reversed() where !hop.isEmpty && !configuration.trustedProxies.contains(hop) {
            // Only something that looks like an address: it ends up in logs and the audit log.
            guard hop.count <= 45, hop.allSatisfy({ $0.isHexDigit || $0 == "." || $0 == ":" }) else { return peer }
            return hop
        }
        return peer
    }
}

/// A bearer token checked for an HTTP request: its entry, or the response refusing it.
enum Authentication {
    case accepted(CredentialEntry)
    case refused(HTTPResponse)
}
