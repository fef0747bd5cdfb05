import RelayCore
import RelayCrypto

#if canImport(Glibc)
import Glibc
#endif

/// The APNs provider token (docs/protocol.md v1.2, Apple's token-based authentication): a JWT signed
/// ES256 with the team's `.p8` key — header `{"alg":"ES256","kid":KEY_ID}`, claims
/// `{"iss":TEAM_ID,"iat":SECONDS}` — reused for `reuse` (Apple accepts one between 20 and 60
/// minutes old and refuses a new one more often than every 20), minted again after that, after
/// an `ExpiredProviderToken` answer, and after the key is reloaded. Thread-safe.
public final class ProviderToken: Sendable {
    public struct Identity: Sendable, Equatable {
        public var keyID: String
        public var teamID: String
        public init(keyID: String, teamID: String) {
            self.keyID = keyID
            self.teamID = teamID
        }
    }

    /// How long one token is used: inside Apple's 20–60 minute band.
    public static let reuse: Int64 = 40 * 60

    private let identity: Identity
    private let state: Locked<(signer: ES256Signer, token: String?, issuedAt: Int64)>
    private let clock: @Sendable () -> Int64

    public init(keyPEM: [UInt8], identity: Identity, clock: @escaping @Sendable () -> Int64 = { Int64(time(nil)) }) throws {
        self.identity = identity
        self.clock = clock
        state = Locked((try ES256Signer(pem: keyPEM), nil, 0))
    }

    /// The token to send now.
    public func current() throws -> String {
        let now = clock()
        return try state.withLock { s in
            if let token = s.token, now - s.issuedAt < ProviderToken.reuse { return token }
            let token = try mint(with: s.signer, at: now)
            s.token = token
            s.issuedAt = now
            return token
        }
    }

    /// APNs refused `token` as expired: the next `current()` mints another (unless one already did).
    public func invalidate(_ token: String) {
        state.withLock { if $0.token == token { $0.token = nil } }
    }

    /// A new key (SIGHUP): the next token is signed with it.
    public func replaceKey(pem: [UInt8]) throws {
        let signer = try ES256Signer(pem: pem)
        state.withLock { $0 = (signer, nil, 0) }
    }

    private func mint(with signer: ES256Signer, at now: Int64) throws -> String {
        let header = JSONValue.object([("alg", "ES256"), ("kid", .string(identity.keyID))]).encodedBytes
        let claims = JSONValue.object([("iss", .string(identity.teamID)), ("iat", .int(now))]).encodedBytes
        let signingInput = Base64.encodeURLSafe(header) + "." + Base64.encodeURLSafe(claims)
        return signingInput + "." + Base64.encodeURLSafe(try signer.sign(Array(signingInput.utf8)))
    }
}
