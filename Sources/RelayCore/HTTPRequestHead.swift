#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

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
    public func argument(_ name: String) throws(RequestError) -> String? {
        var found: String?
        for argument in arguments where argument.name == name {
            if found != nil { throw RequestError(.badRequest, "query argument '\(name)' is repeated") }
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
        case invalid(RequestError)
    }

    /// Parses the head at the start of `bytes` (which may hold less, or more, than the head).
    public static func parse(_ bytes: [UInt8], limits: Limits = Limits()) -> ParseResult {
        var parser = Parser(bytes: bytes, limits: limits)
        do {
            return try parser.run()
        } catch {
            return .invalid(error)
        }
    }

    /// Percent-decodes `text` exactly: `%XX` only, nothing else changes. The result must be valid
    /// UTF-8 without NUL or control characters.
    public static func percentDecode(_ text: ArraySlice<UInt8>, what: String) throws(RequestError) -> String {
        // Nothing to decode (most paths and arguments): checked as it is, no copy in between.
        if !text.contains(UInt8(ascii: "%")) { return try checkedText(text, what: what) }
        var out: [UInt8] = []
        out.reserveCapacity(text.count)
        var i = text.startIndex
        while i < text.endIndex {
            var byte = text[i]
            if byte == UInt8(ascii: "%") {
                guard i + 2 < text.endIndex, let high = hexValue(text[i + 1]), let low = hexValue(text[i + 2])
                else { throw RequestError(.badRequest, "malformed percent-encoding in \(what)") }
                byte = high << 4 | low
                i += 3
            } else {
                i += 1
            }
            if byte < 0x20 || byte == 0x7F {
                throw RequestError(.badRequest, "control character in \(what)")
            }
            out.append(byte)
        }
        return try checkedText(out, what: what)
    }

    /// `bytes` as text: valid UTF-8 without NUL or control characters.
    private static func checkedText(_ bytes: some Collection<UInt8>, what: String) throws(RequestError) -> String {
        var ascii = true
        for byte in bytes {
            if byte < 0x20 || byte == 0x7F { throw RequestError(.badRequest, "control character in \(what)") }
            if byte >= 0x80 { ascii = false }
        }
        // ASCII is valid UTF-8 as it stands (almost every path and argument).
        if ascii { return String(decoding: bytes, as: UTF8.self) }
        guard let decoded = String(validating: bytes, as: UTF8.self) else {
            throw RequestError(.badRequest, "\(what) is not valid UTF-8")
        }
        return decoded
    }

    private static func hexValue(_ byte: UInt8) -> UInt8? {
        switch byte {
        case UInt8(ascii: "0")...UInt8(ascii: "9"): byte - UInt8(ascii: "0")
        case UInt8(ascii: "a")...UInt8(ascii: "f"): byte - UInt8(ascii: "a") + 10
        case UInt8(ascii: "A")...UInt8(ascii: "F"): byte - UInt8(ascii: "A") + 10
        default: nil
        }
    }

    /// RFC 9110 tchar.
    static func isTokenByte(_ b: UInt8) -> Bool {
        switch b {
        case UInt8(ascii: "a")...UInt8(ascii: "z"), UInt8(ascii: "A")...UInt8(ascii: "Z"), UInt8(ascii: "0")...UInt8(ascii: "9"):
            true
        case UInt8(ascii: "!"), UInt8(ascii: "#"), UInt8(ascii: "$"), UInt8(ascii: "%"), UInt8(ascii: "&"),
             UInt8(ascii: "'"), UInt8(ascii: "*"), UInt8(ascii: "+"), UInt8(ascii: "-"), UInt8(ascii: "."),
             UInt8(ascii: "^"), UInt8(ascii: "_"), UInt8(ascii: "`"), UInt8(ascii: "|"), UInt8(ascii: "~"):
            true
        default:
            false
        }
    }
}

/// A request the relay refuses before routing: the status and the contract's error body.
public struct RequestError: Error, Sendable, Equatable {
    public var code: ErrorCode
    public var message: String
    public var status: Int { code.httpStatus }

    public init(_ code: ErrorCode, _ message: String) {
        self.code = code
        self.message = message
    }
}

/// The state of one parse over a byte buffer.
private struct Parser {
    let bytes: [UInt8]
    let limits: HTTPRequestHead.Limits
    var position = 0

    init(bytes: [UInt8], limits: HTTPRequestHead.Limits) {
        self.bytes = bytes
        self.limits = limits
    }

    /// The index of the next CRLF at or after `position`, nil if not there yet; a bare LF or CR
    /// before it is an error. `tooLong` is made only when thrown (its message is an
    /// interpolation: ~5,000 instructions a request when both were built up front).
    func lineEnd(maximum: Int, tooLong: @autoclosure () -> RequestError) throws(RequestError) -> Int? {
        let limit = min(bytes.count, position + maximum + 2)
        // The first CR or LF, found with memchr (vectorised) rather than a byte-by-byte switch.
        let found: Int? = bytes.withUnsafeBufferPointer { all in
            guard let base = all.baseAddress, limit > position else { return nil }
            let cr = memchr(base + position, 0x0D, limit - position).map { UnsafeRawPointer($0) - UnsafeRawPointer(base) }
            let lfLimit = cr ?? limit
            let lf = memchr(base + position, 0x0A, lfLimit - position).map { UnsafeRawPointer($0) - UnsafeRawPointer(base) }
            return lf ?? cr
        }
        if let i = found {
            guard bytes[i] == 0x0D else { throw RequestError(.badRequest, "bare LF in the request head") }
            guard i + 1 < bytes.count else { return nil }
            guard bytes[i + 1] == 0x0A else { throw RequestError(.badRequest, "bare CR in the request head") }
            guard i - position <= maximum else { throw tooLong() }
            return i
        }
        if bytes.count - position > maximum { throw tooLong() }
        return nil
    }

    mutating func run() throws(RequestError) -> HTTPRequestHead.ParseResult {
        guard let end = try lineEnd(maximum: limits.requestLine,
                                    tooLong: RequestError(.uriTooLong, "the request line is over \(limits.requestLine) bytes"))
        else { return .incomplete }
        var head = try requestLine(bytes[position..<end])
        position = end + 2
        let headersStart = position
        func headersTooLarge() -> RequestError {
            RequestError(.headersTooLarge, "the header section is over \(limits.headerBytes) bytes or \(limits.headerCount) fields")
        }
        head.headers.reserveCapacity(16)
        while true {
            let remaining = limits.headerBytes - (position - headersStart)
            guard let end = try lineEnd(maximum: max(remaining, 0), tooLong: headersTooLarge()) else {
                return .incomplete
            }
            if end == position {
                position += 2
                break
            }
            guard head.headers.count < limits.headerCount else { throw headersTooLarge() }
            head.headers.append(try field(bytes[position..<end]))
            position = end + 2
        }
        try checkFraming(head)
        return .complete(head, length: position)
    }

    private func requestLine(_ line: ArraySlice<UInt8>) throws(RequestError) -> HTTPRequestHead {
        // Exactly three parts between two single spaces (found by hand: a generic `split` cost
        // ~4,000 instructions a request).
        let space = UInt8(ascii: " ")
        guard let first = line.firstIndex(of: space), let second = line[(first + 1)...].firstIndex(of: space),
              !line[(second + 1)...].contains(space), first > line.startIndex, second > first + 1 else {
            throw RequestError(.badRequest, "malformed request line")
        }
        let method = line[..<first], target = line[(first + 1)..<second]
        guard method.allSatisfy(HTTPRequestHead.isTokenByte) else { throw RequestError(.badRequest, "malformed method") }
        let version = String(decoding: line[(second + 1)...], as: UTF8.self)
        guard version == "HTTP/1.1" || version == "HTTP/1.0" else {
            throw RequestError(.httpVersionNotSupported, "only HTTP/1.1 and HTTP/1.0 are served")
        }
        guard target.allSatisfy({ $0 > 0x20 && $0 < 0x7F }) else {
            throw RequestError(.badRequest, "the request target has characters that must be percent-encoded")
        }
        guard target.first == UInt8(ascii: "/") else {
            throw RequestError(.badRequest, "the request target must be a path (origin-form)")
        }
        guard !target.contains(UInt8(ascii: "#")) else { throw RequestError(.badRequest, "fragment in the request target") }
        let question = target.firstIndex(of: UInt8(ascii: "?"))
        let rawPath = target[..<(question ?? target.endIndex)]
        let path = try HTTPRequestHead.percentDecode(rawPath, what: "the path")
        var arguments: [HTTPRequestHead.Argument] = []
        if let question {
            let query = target[(question + 1)...]
            guard query.count <= limits.query else {
                throw RequestError(.uriTooLong, "the query is over \(limits.query) bytes")
            }
            // `&`-separated pairs, empty ones skipped.
            var start = query.startIndex
            while start < query.endIndex {
                let end = query[start...].firstIndex(of: UInt8(ascii: "&")) ?? query.endIndex
                defer { start = end + 1 }
                guard end > start else { continue }
                let pair = query[start..<end]
                let equals = pair.firstIndex(of: UInt8(ascii: "="))
                let name = try HTTPRequestHead.percentDecode(pair[..<(equals ?? pair.endIndex)], what: "the query")
                let value = try equals.map { eq throws(RequestError) in
                    try HTTPRequestHead.percentDecode(pair[(eq + 1)...], what: "the query")
                } ?? ""
                arguments.append(.init(name: name, value: value))
            }
        }
        return HTTPRequestHead(method: String(decoding: method, as: UTF8.self), path: path, arguments: arguments,
                               version: version, rawPath: String(decoding: rawPath, as: UTF8.self),
                               rawQuery: question.map { String(decoding: target[($0 + 1)...], as: UTF8.self) })
    }

    private func field(_ line: ArraySlice<UInt8>) throws(RequestError) -> (name: String, value: String) {
        guard let colon = line.firstIndex(of: UInt8(ascii: ":")), colon > line.startIndex else {
            throw RequestError(.badRequest, line.first == 0x20 || line.first == 0x09
                               ? "folded header lines are not accepted" : "malformed header field")
        }
        let name = line[..<colon]
        guard name.allSatisfy(HTTPRequestHead.isTokenByte) else { throw RequestError(.badRequest, "malformed header name") }
        var value = line[(colon + 1)...]
        while let first = value.first, first == 0x20 || first == 0x09 { value = value.dropFirst() }
        while let last = value.last, last == 0x20 || last == 0x09 { value = value.dropLast() }
        guard value.allSatisfy({ $0 == 0x09 || ($0 >= 0x20 && $0 != 0x7F) }) else {
            throw RequestError(.badRequest, "control character in a header value")
        }
        // Names are ASCII tokens: lowercased byte by byte (String.lowercased() is Unicode's, and
        // costs more than the rest of the field). Values are Latin-1 by RFC: ASCII ones (all the
        // relay reads) decode as they are, others map byte to scalar.
        let lowered = String(unsafeUninitializedCapacity: name.count) { (out: UnsafeMutableBufferPointer<UInt8>) -> Int in
            for (k, b) in name.enumerated() { out[k] = b >= 0x41 && b <= 0x5A ? b | 0x20 : b }
            return name.count
        }
        let text = value.allSatisfy { $0 < 0x80 } ? String(decoding: value, as: UTF8.self)
            : String(String.UnicodeScalarView(value.map { Unicode.Scalar($0) }))
        return (lowered, text)
    }

    /// Refuses heads two parsers could read differently (request smuggling). One pass over the
    /// fields (filtered arrays and a set cost ~1,800 instructions a request).
    private func checkFraming(_ head: HTTPRequestHead) throws(RequestError) {
        var hosts = 0
        var length: String?
        var lengthInvalid = false
        var transferEncoding = false
        for field in head.headers {
            switch field.name {
            case "host":
                hosts += 1
            case "content-length":
                let value = field.value
                if value.isEmpty || value.utf8.count > 18 || !value.utf8.allSatisfy({ $0 >= 0x30 && $0 <= 0x39 })
                    || (length != nil && length != value) {
                    lengthInvalid = true
                }
                length = value
            case "transfer-encoding":
                transferEncoding = true
            default:
                break
            }
        }
        if hosts > 1 { throw RequestError(.badRequest, "more than one Host header") }
        if lengthInvalid { throw RequestError(.badRequest, "invalid Content-Length") }
        if length != nil, transferEncoding {
            throw RequestError(.badRequest, "Content-Length together with Transfer-Encoding")
        }
    }
}
