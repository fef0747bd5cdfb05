/// One HTTP/1.x request head exactly as the client sent it, parsed strictly (RFC 9112 §2–5,
/// RFC 3986 percent-encoding). The relay's gate parses every request's raw bytes with it before
/// libwebsockets sees anything, so the device id that is checked is the one that was sent:
///
///     GET /ws/app?device_id=robot-42&token=wimz_a_… HTTP/1.1\r\n
///     Host: api.wimzai.com\r\n
///     …\r\n
///     \r\n
///
/// - request line: `METHOD SP origin-form SP HTTP/1.0|HTTP/1.1 CRLF`, visible ASCII only;
/// - path and query: `%XX` decoded exactly (no `+` rule, no `;` separator, no dot-segment
///   folding); decoded NUL, control characters or invalid UTF-8 are refused;
/// - query arguments: separated by `&` only, `name=value`; a name may appear once;
/// - headers: `token ":" OWS value OWS CRLF`, no obs-fold, no NUL or control characters other
///   than HTAB; one `Host` at most; no `Content-Length` with `Transfer-Encoding`;
/// - sizes: request line ≤ `Limits.requestLine` bytes (else 414), query ≤ `Limits.query` (414),
///   header section ≤ `Limits.headerBytes` and ≤ `Limits.headerCount` fields (431).
public struct HTTPRequestHead: Sendable, Equatable {
    public struct Limits: Sendable {
        public var requestLine = 4096
        public var query = 2048
        public var headerBytes = 8192
        public var headerCount = 64
        public init() {}
    }

    public struct Argument: Sendable, Equatable {
        public var name: String
        public var value: String
        public init(name: String, value: String) {
            self.name = name
            self.value = value
        }
    }

    public var method: String
    /// The decoded path: `/ws/app`.
    public var path: String
    public var arguments: [Argument]
    /// `HTTP/1.1` or `HTTP/1.0`.
    public var version: String
    /// Header fields in order, names lower-cased.
    public var headers: [(name: String, value: String)]
    /// The path and the query exactly as sent (visible ASCII, still percent-encoded), for
    /// requests passed on unchanged (HTTP to the robot). `rawQuery` is nil without a `?`.
    public var rawPath: String
    public var rawQuery: String?
    /// The token the head presents, read and hashed once by the front door (nil: none, or not
    /// read yet). Not part of the head's equality: it is derived from the headers.
    public var credential: PresentedCredential?

    public init(method: String, path: String, arguments: [Argument] = [], version: String = "HTTP/1.1",
                headers: [(name: String, value: String)] = [], rawPath: String? = nil, rawQuery: String? = nil) {
        self.method = method
        self.path = path
        self.rawPath = rawPath ?? path
        self.rawQuery = rawQuery
        self.arguments = arguments
        self.version = version
        self.headers = headers
    }

    public static func == (a: HTTPRequestHead, b: HTTPRequestHead) -> Bool {
        a.method == b.method && a.path == b.path && a.arguments == b.arguments && a.version == b.version
            && a.headers.map(\.name) == b.headers.map(\.name) && a.headers.map(\.value) == b.headers.map(\.value)
    }

    /// The value of query argument `name`; nil when absent. A repeated name is an error: which
    /// one a component would pick is exactly the ambiguity an attacker wants.
    public func argument(_ name: String) throws(RelayError) -> String? {
        var found: String?
        for argument in arguments where argument.name == name {
            if found != nil { throw RelayError(.badRequest, "query argument '\(name)' is repeated") }
            found = argument.value
        }
        return found
    }

    /// The first value of header `name` (lower case).
    public func header(_ name: String) -> String? {
        headers.first { $0.name == name }?.value
    }

    /// True for a WebSocket upgrade request (`Upgrade: websocket`).
    public var isWebSocketUpgrade: Bool {
        header("upgrade").map { $0.lowercased() == "websocket" } ?? false
    }

    // MARK: - Parsing

    public enum ParseResult: Sendable, Equatable {
        /// The head, and how many bytes it took (everything after it is the body).
        case complete(HTTPRequestHead, length: Int)
        /// More bytes are needed (and the limits allow them).
        case incomplete
        case invalid(RelayError)
    }

    /// Parses the head at the start of `bytes` (which may hold less, or more, than the head).
    public static func parse(_ bytes: [UInt8], limits: Limits = Limits()) -> ParseResult {
        bytes.withUnsafeBytes { parse($0, limits: limits) }
    }

    /// The same over bytes where they lie (the gate's accept buffer).
    public static func parse(_ bytes: UnsafeRawBufferPointer, limits: Limits = Limits()) -> ParseResult {
        var parser = HTTPHeadParser(bytes: bytes.assumingMemoryBound(to: UInt8.self), limits: limits)
        do throws(RelayError) {
            return try parser.run()
        } catch {
            return .invalid(error)
        }
    }

    /// Percent-decodes `text` exactly: `%XX` only, nothing else changes. The result must be valid
    /// UTF-8 without NUL or control characters.
    public static func percentDecode(_ text: ArraySlice<UInt8>, what: String) throws(RelayError) -> String {
        try text.withUnsafeBufferPointer { buffer throws(RelayError) in try percentDecode(buffer, what: what) }
    }

    static func percentDecode(_ text: UnsafeBufferPointer<UInt8>, what: String) throws(RelayError) -> String {
        // Nothing to decode (most paths and arguments): checked as it is, no copy in between.
        if !text.contains(UInt8(ascii: "%")) { return try checkedText(text, what: what) }
        var out: [UInt8] = []
        out.reserveCapacity(text.count)
        var i = 0
        while i < text.count {
            var byte = text[i]
            if byte == UInt8(ascii: "%") {
                guard i + 2 < text.count, let high = Hex.value(ofDigit: text[i + 1]), let low = Hex.value(ofDigit: text[i + 2])
                else { throw RelayError(.badRequest, "malformed percent-encoding in \(what)") }
                byte = high << 4 | low
                i += 3
            } else {
                i += 1
            }
            if byte < 0x20 || byte == 0x7F {
                throw RelayError(.badRequest, "control character in \(what)")
            }
            out.append(byte)
        }
        return try out.withUnsafeBufferPointer { decoded throws(RelayError) in try checkedText(decoded, what: what) }
    }

    /// `bytes` as text: valid UTF-8 without NUL or control characters.
    private static func checkedText(_ bytes: UnsafeBufferPointer<UInt8>, what: String) throws(RelayError) -> String {
        var ascii = true
        for byte in bytes {
            if byte < 0x20 || byte == 0x7F { throw RelayError(.badRequest, "control character in \(what)") }
            if byte >= 0x80 { ascii = false }
        }
        // ASCII is valid UTF-8 as it stands (almost every path and argument).
        if ascii { return String(decoding: bytes, as: UTF8.self) }
        guard let decoded = String(validating: bytes, as: UTF8.self) else {
            throw RelayError(.badRequest, "\(what) is not valid UTF-8")
        }
        return decoded
    }

    /// RFC 9110 tchar: `!#$%&'*+-.^_`|~`, digits and letters, as two bit masks (one test a
    /// byte; a switch over the ranges cost several).
    static func isTokenByte(_ b: UInt8) -> Bool {
        b < 64 ? (0x03FF_6CFA_0000_0000 as UInt64) >> b & 1 == 1
            : b < 128 && (0x57FF_FFFF_C7FF_FFFE as UInt64) >> (b - 64) & 1 == 1
    }
}
