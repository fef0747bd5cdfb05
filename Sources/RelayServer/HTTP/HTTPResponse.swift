import RelayCore
import WimzProtocol

/// A complete HTTP response written in one go: the relay's own (JSON or text, never cached), or a
/// robot's passed through (its own headers, content type included).
struct HTTPResponse: Sendable {
    var status: Int
    /// Nil when `headers` carry the content type (or there is none).
    var contentType: String? = "application/json"
    var headers: [(String, String)] = []
    var body: [UInt8]
    /// `cache-control: no-store` on the relay's own answers; a robot's response keeps its own.
    var noStore = true

    init(status: Int, contentType: String? = "application/json", headers: [(String, String)] = [], body: [UInt8],
         noStore: Bool = true) {
        self.status = status
        self.contentType = contentType
        self.headers = headers
        self.body = body
        self.noStore = noStore
    }

    /// The status line's reason phrase for the statuses the relay sends.
    var reasonPhrase: String {
        switch status {
        case 200: "OK"
        case 201: "Created"
        case 202: "Accepted"
        case 204: "No Content"
        case 301: "Moved Permanently"
        case 302: "Found"
        case 304: "Not Modified"
        case 400: "Bad Request"
        case 401: "Unauthorized"
        case 403: "Forbidden"
        case 404: "Not Found"
        case 405: "Method Not Allowed"
        case 409: "Conflict"
        case 411: "Length Required"
        case 413: "Content Too Large"
        case 414: "URI Too Long"
        case 429: "Too Many Requests"
        case 431: "Request Header Fields Too Large"
        case 422: "Unprocessable Content"
        case 500: "Internal Server Error"
        case 501: "Not Implemented"
        case 502: "Bad Gateway"
        case 503: "Service Unavailable"
        case 504: "Gateway Timeout"
        case 505: "HTTP Version Not Supported"
        default: status < 500 ? "Client Error" : "Server Error"
        }
    }

    /// The whole response as HTTP/1.1 bytes (for the gate, which writes to the socket itself).
    /// 204 and 304 carry neither a length nor a body (RFC 9110 §8.6).
    func serialized() -> [UInt8] {
        let bodyless = status == 204 || status == 304
        var head = "HTTP/1.1 \(status) \(reasonPhrase)\r\n"
        if let contentType { head += "content-type: \(contentType)\r\n" }
        if !bodyless { head += "content-length: \(body.count)\r\n" }
        if noStore { head += "cache-control: no-store\r\n" }
        for (name, value) in headers { head += "\(name.lowercased()): \(value)\r\n" }
        return Array((head + "\r\n").utf8) + (bodyless ? [] : body)
    }

    /// A JSON body.
    static func json(_ status: Int, _ value: JSONValue, headers: [(String, String)] = []) -> HTTPResponse {
        var body = value.encodedBytes
        body.append(UInt8(ascii: "\n"))
        return HTTPResponse(status: status, headers: headers, body: body)
    }

    /// 204, no body (a removal done).
    static let noContent = HTTPResponse(status: 204, contentType: nil, headers: [], body: [], noStore: true)

    /// A refusal's answer: the contract's error body `{"error":CODE,"message":TEXT}`, its
    /// status and its headers, and the code again in `Wimz-Error` — a client that is not handed
    /// the body (URLSession's WebSocket task, on a refused upgrade) still learns why. `fields`:
    /// what the contract adds to the body of this refusal (a conflict's current state).
    static func error(_ error: RelayError, adding fields: [(String, JSONValue)] = []) -> HTTPResponse {
        json(error.status, .object([("error", .string(error.code.rawValue)), ("message", .string(error.message))] + fields),
             headers: [(WimzProtocol.errorHeader, error.code.rawValue)] + error.headers.map { ($0.name, $0.value) })
    }

    /// The same, written out: `.error(.notFound, "no such registration")`.
    static func error(_ code: ErrorCode, _ message: String, headers: [(String, String)] = []) -> HTTPResponse {
        error(RelayError(code, message, headers: headers))
    }
}
