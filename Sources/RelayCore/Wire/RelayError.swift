/// The relay's one refusal: an error code of the contract (its HTTP status and wire name), the
/// message, and the headers its answer needs. Every refusal is one — a malformed request head, a
/// refused credential, a household rule, an admin request, a push registration — and becomes an
/// HTTP answer (`{"error":CODE,"message":TEXT}`, `HTTPResponse.error`), an error frame on a
/// socket (`RelayMessages.error`), or a refused upgrade.
public struct RelayError: Error, Sendable, Equatable {
    public var code: ErrorCode
    public var message: String
    /// Headers the answer carries besides the body (`WWW-Authenticate`, `Retry-After`, `Allow`).
    public var headers: [Header]
    public var status: Int { code.httpStatus }

    public struct Header: Sendable, Equatable {
        public var name: String
        public var value: String
    }

    public init(_ code: ErrorCode, _ message: String, headers: [(String, String)] = []) {
        self.code = code
        self.message = message
        self.headers = headers.map { Header(name: $0.0, value: $0.1) }
    }

    /// A refused credential: `WWW-Authenticate` on a 401, `Retry-After` on a 429 or 503.
    public static func authentication(_ code: ErrorCode, _ message: String) -> RelayError {
        switch code.httpStatus {
        case 401: return RelayError(code, message, headers: [("WWW-Authenticate", "Bearer realm=\"wimz\", error=\"invalid_token\"")])
        case 429, 503: return RelayError(code, message, headers: [("Retry-After", "1")])
        default: return RelayError(code, message)
        }
    }
}
