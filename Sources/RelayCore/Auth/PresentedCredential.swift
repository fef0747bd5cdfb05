/// The bearer token a request presents and its SHA-256 digest (the token cache's and the store's
/// key). The front door reads it from the head and hashes it once — before the token's lookup —
/// and it travels with the head (``HTTPRequestHead/credential``) to every check after, the
/// upgrade's confirmation included.
public struct PresentedCredential: Sendable, Equatable {
    public let token: String
    public let digest: [UInt8]

    public init(token: String, digest: [UInt8]) {
        self.token = token
        self.digest = digest
    }

    /// Where a request presents its token: `Authorization: Bearer …`, or for a WebSocket upgrade
    /// also its `token=` query argument (apps on platforms whose WebSocket API sets no headers).
    /// An empty token is none; a `token=` given twice is none here (the upgrade's own check
    /// answers it 400).
    public static func token(presentedIn head: HTTPRequestHead) -> String? {
        if let bearer = head.header("authorization").flatMap(Redaction.bearerToken(fromAuthorization:)), !bearer.isEmpty {
            return bearer
        }
        guard head.isWebSocketUpgrade, let argument = (try? head.argument("token")) ?? nil, !argument.isEmpty else { return nil }
        return argument
    }
}
