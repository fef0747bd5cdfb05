import RelayCore

/// A complete, small HTTP response (JSON or text) written in one go.
struct HTTPResponse: Sendable {
    var status: Int
    var contentType = "application/json"
    var headers: [(String, String)] = []
    var body: [UInt8]

    init(status: Int, contentType: String = "application/json", headers: [(String, String)] = [], body: [UInt8]) {
        self.status = status
        self.contentType = contentType
        self.headers = headers
        self.body = body
    }

    /// The status line's reason phrase for the statuses the relay sends.
    var reasonPhrase: String {
        switch status {
        case 200: "OK"
        case 400: "Bad Request"
        case 401: "Unauthorized"
        case 403: "Forbidden"
        case 404: "Not Found"
        case 405: "Method Not Allowed"
        case 414: "URI Too Long"
        case 429: "Too Many Requests"
        case 431: "Request Header Fields Too Large"
        case 505: "HTTP Version Not Supported"
        case 503: "Service Unavailable"
        default: status < 500 ? "Client Error" : "Server Error"
        }
    }

    /// The whole response as HTTP/1.1 bytes (for the gate, which writes to the socket itself).
    func serialized() -> [UInt8] {
        var head = "HTTP/1.1 \(status) \(reasonPhrase)\r\ncontent-type: \(contentType)\r\n"
            + "content-length: \(body.count)\r\ncache-control: no-store\r\n"
        for (name, value) in headers { head += "\(name.lowercased()): \(value)\r\n" }
        return Array((head + "\r\n").utf8) + body
    }

    /// A JSON body.
    static func json(_ status: Int, _ value: JSONValue, headers: [(String, String)] = []) -> HTTPResponse {
        var body = value.encodedBytes
        body.append(UInt8(ascii: "\n"))
        return HTTPResponse(status: status, headers: headers, body: body)
    }

    /// The contract's error body: `{"error":CODE,"message":TEXT}`.
    static func error(_ status: Int, _ code: String, _ message: String, headers: [(String, String)] = []) -> HTTPResponse {
        json(status, .object([("error", .string(code)), ("message", .string(message))]), headers: headers)
    }

    /// A 401/403/429/503 for a failed authentication, with `WWW-Authenticate` on 401.
    static func authFailure(_ failure: AuthFailure, message: String) -> HTTPResponse {
        var headers: [(String, String)] = []
        switch failure.httpStatus {
        case 401:
            headers.append(("WWW-Authenticate", "Bearer realm=\"wimz\", error=\"invalid_token\""))
        case 429, 503:
            headers.append(("Retry-After", "1"))
        default:
            break
        }
        return error(failure.httpStatus, failure.rawValue, message, headers: headers)
    }
}
