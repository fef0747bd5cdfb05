import WimzProtocol

/// HTTP to the robot through the relay (docs/protocol.md v1.1 "The robot's API through the relay"):
/// the route, which headers cross, and the robot leg's frames.
///
///     app   → relay   POST /api/devices/robot-42/robot/missions/start?a=1
///                     Authorization: Bearer <app token>      (then the body)
///     relay → robot   {"type":"http_request","id":"h3f9c0e21d4a7b658","method":"POST","path":"/missions/start",
///                      "query":"a=1","headers":{"content-type":"application/json"},"body":BASE64|null}
///     robot → relay   {"type":"http_response","id":"h3f9c0e21d4a7b658","status":200,"headers":{…},
///                      "body":BASE64|null,"more":BOOL}
///                     {"type":"http_body","id":"h3f9c0e21d4a7b658","body":BASE64,"more":BOOL}   (while more)
///
/// `path` and `query` are the request target's bytes exactly as the app sent them (still
/// percent-encoded); header names are lower case. A header value may be a string or, for a
/// repeated header, an array of strings (the relay sends repeats joined with ", ").
public enum RobotHTTP {
    /// Methods the route accepts (others: 405 with `Allow`).
    public static let methods = ["GET", "HEAD", "POST", "PUT", "PATCH", "DELETE"]

    /// Hop-by-hop fields (RFC 9110 §7.6.1) and the ones HTTP framing recomputes.
    static let hopByHop: Set<String> = [
        "connection", "keep-alive", "proxy-connection", "proxy-authenticate", "proxy-authorization", "te", "trailer",
        "transfer-encoding", "upgrade", "content-length", "expect",
    ]
    /// Never sent to the robot: the app's credentials for the relay, its cookies, and what the
    /// relay and its balancer add or consume.
    static let relayOwnRequestFields: Set<String> = [
        "authorization", "cookie", "host", "x-forwarded-for", "x-forwarded-proto", "x-forwarded-host", "x-forwarded-port",
        "forwarded", "x-real-ip",
    ]

    /// The end-to-end request headers the robot gets: without hop-by-hop fields (including the
    /// ones `Connection` names) and the relay's own; repeated names joined with ", ".
    public static func forwardedRequestHeaders(_ headers: [(name: String, value: String)]) -> [(String, String)] {
        let named = Set(headers.filter { $0.name == "connection" }
            .flatMap { $0.value.split(separator: ",").map { $0.trimmingSpaces.lowercased() } })
        var out: [(String, String)] = []
        for (name, value) in headers
        where !hopByHop.contains(name) && !relayOwnRequestFields.contains(name) && !named.contains(name)
            // `X-Wimz-*` is who-is-speaking on the robot's side (the bridge's X-Wimz-Member and
            // X-Wimz-Access, from the relay's `from`): never an app's to set.
            && !name.hasPrefix("x-wimz-") {
            if let k = out.firstIndex(where: { $0.0 == name }) {
                out[k].1 += ", " + value
            } else {
                out.append((name, value))
            }
        }
        return out
    }

    /// The `http_request` frame (body already base64-encoded, or nil when there is none).
    /// `from`: the asking member, first, for a robot that opted in (docs/protocol.md v1.3 "Who is speaking").
    public static func requestFrame(id: UInt64, method: String, path: String, query: String?,
                                    headers: [(String, String)], bodyBase64: String?, from: JSONValue? = nil) -> [UInt8] {
        JSONValue.object((from.map { [("from", $0)] } ?? []) + [
            ("type", .string(WimzProtocol.MessageType.httpRequest)), ("id", .string(ExchangeID.text(UInt8(ascii: "h"), id))), ("method", .string(method)), ("path", .string(path)),
            ("query", .optional(query)), ("headers", .object(headers.map { ($0.0, .string($0.1)) })),
            ("body", .optional(bodyBase64)),
        ]).encodedBytes
    }

    /// A robot's answer frame, read whole.
    public enum RobotFrame: Equatable, Sendable {
        case response(id: UInt64, status: Int, headers: [Header], body: String?, more: Bool)
        case body(id: UInt64, body: String?, more: Bool)

        public var id: UInt64 {
            switch self { case .response(let id, _, _, _, _), .body(let id, _, _): id }
        }
        /// The base64 body (nil: none).
        public var body: String? {
            switch self { case .response(_, _, _, let body, _), .body(_, let body, _): body }
        }
        public var more: Bool {
            switch self { case .response(_, _, _, _, let more), .body(_, _, let more): more }
        }
    }

    public struct Header: Equatable, Sendable {
        public var name: String
        public var value: String
        public init(_ name: String, _ value: String) {
            self.name = name
            self.value = value
        }
    }

    /// What was wrong with a robot's answer frame (logged; the app gets 502 `bad_robot_response`
    /// when the frame's id is known).
    public struct FrameError: Error, Equatable, Sendable {
        public var id: UInt64?
        public var message: String
    }

    /// Reads an `http_response` or `http_body` frame. Response headers that could not be sent
    /// safely (a name that is not a token, a value with CR, LF or another control character) or
    /// that HTTP framing recomputes are left out.
    public static func parse(_ bytes: [UInt8]) -> Result<RobotFrame, FrameError> {
        let value: JSONValue
        do { value = try JSONReader.parse(bytes) } catch {
            return .failure(FrameError(id: nil, message: "not JSON: \(error.message) at \(error.offset)"))
        }
        guard let idText = value.member("id")?.stringValue, let id = parseID(idText) else {
            return .failure(FrameError(id: nil, message: "missing or unknown id"))
        }
        func failure(_ message: String) -> Result<RobotFrame, FrameError> { .failure(FrameError(id: id, message: message)) }
        let more: Bool
        switch value.member("more") {
        case nil, .null?: more = false
        case .bool(let flag)?: more = flag
        default: return failure("more must be a boolean")
        }
        let body: String?
        switch value.member("body") {
        case nil, .null?: body = nil
        case .string(let text)?: body = text
        default: return failure("body must be a base64 string or null")
        }
        switch value.member("type")?.stringValue {
        case WimzProtocol.MessageType.httpBody:
            return .success(.body(id: id, body: body, more: more))
        case WimzProtocol.MessageType.httpResponse:
            guard let status = value.member("status")?.intValue, (200...599).contains(status) else {
                return failure("status must be an integer 200…599")
            }
            var headers: [Header] = []
            switch value.member("headers") {
            case nil, .null?: break
            case .object(let members)?:
                for (name, field) in members {
                    let lower = name.lowercased()
                    guard isToken(lower), !hopByHop.contains(lower) else { continue }
                    let values: [JSONValue]
                    if case .array(let items) = field { values = items } else { values = [field] }
                    for case .string(let text) in values where isSafeValue(text) { headers.append(Header(lower, text)) }
                }
            default: return failure("headers must be an object")
            }
            return .success(.response(id: id, status: Int(status), headers: headers, body: body, more: more))
        default:
            return failure("type must be http_response or http_body")
        }
    }

    /// `"h00000000000000ab"` → 0xab (see `ExchangeID`).
    static func parseID(_ text: String) -> UInt64? { ExchangeID.parse(text, prefix: UInt8(ascii: "h")) }

    /// RFC 9110 token characters.
    public static func isToken(_ name: String) -> Bool {
        !name.isEmpty && name.utf8.allSatisfy { c in
            (c >= 0x30 && c <= 0x39) || (c >= 0x61 && c <= 0x7A) || (c >= 0x41 && c <= 0x5A)
                || "!#$%&'*+-.^_`|~".utf8.contains(c)
        }
    }

    /// No CR, LF, NUL or other control characters (HTAB allowed): nothing that could end the
    /// header line and start another.
    public static func isSafeValue(_ value: String) -> Bool {
        value.utf8.count <= 8192 && value.utf8.allSatisfy { $0 == 0x09 || ($0 >= 0x20 && $0 != 0x7F) }
    }
}

extension Substring {
    fileprivate var trimmingSpaces: Substring {
        var s = self
        while s.first == " " || s.first == "\t" { s = s.dropFirst() }
        while s.last == " " || s.last == "\t" { s = s.dropLast() }
        return s
    }
}
