#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// One parse of a request head (the grammar is on `HTTPRequestHead`) over the bytes' memory:
/// every request the relay serves goes through it, so it walks the buffer directly — no array
/// slices (a retain and release each) and one pass per part where it can.
struct HTTPHeadParser {
    let bytes: UnsafeBufferPointer<UInt8>
    let limits: HTTPRequestHead.Limits
    var position = 0

    init(bytes: UnsafeBufferPointer<UInt8>, limits: HTTPRequestHead.Limits) {
        self.bytes = bytes
        self.limits = limits
    }

    /// The index of the next CRLF at or after `position`, nil if not there yet; a bare LF or CR
    /// before it is an error. `tooLong` is made only when thrown (its message is an
    /// interpolation: ~5,000 instructions a request when both were built up front).
    func lineEnd(maximum: Int, tooLong: @autoclosure () -> RelayError) throws(RelayError) -> Int? {
        let limit = min(bytes.count, position + maximum + 2)
        var found: Int?
        // The first CR or LF, found with memchr (vectorised) rather than a byte-by-byte switch.
        if let base = bytes.baseAddress, limit > position {
            let cr = memchr(base + position, 0x0D, limit - position).map { UnsafeRawPointer($0) - UnsafeRawPointer(base) }
            let lf = memchr(base + position, 0x0A, (cr ?? limit) - position).map { UnsafeRawPointer($0) - UnsafeRawPointer(base) }
            found = lf ?? cr
        }
        if let i = found {
            guard bytes[i] == 0x0D else { throw RelayError(.badRequest, "bare LF in the request head") }
            guard i + 1 < bytes.count else { return nil }
            guard bytes[i + 1] == 0x0A else { throw RelayError(.badRequest, "bare CR in the request head") }
            guard i - position <= maximum else { throw tooLong() }
            return i
        }
        if bytes.count - position > maximum { throw tooLong() }
        return nil
    }

    mutating func run() throws(RelayError) -> HTTPRequestHead.ParseResult {
        guard let end = try lineEnd(maximum: limits.requestLine,
                                    tooLong: RelayError(.uriTooLong, "the request line is over \(limits.requestLine) bytes"))
        else { return .incomplete }
        var head = try requestLine(position, end)
        position = end + 2
        let headersStart = position
        func headersTooLarge() -> RelayError {
            RelayError(.headersTooLarge, "the header section is over \(limits.headerBytes) bytes or \(limits.headerCount) fields")
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
            head.headers.append(try field(position, end))
            position = end + 2
        }
        try checkFraming(head)
        return .complete(head, length: position)
    }

    /// `HTTP/1.1` and `HTTP/1.0` as the words their bytes load as.
    private static let http11 = word("HTTP/1.1")
    private static let http10 = word("HTTP/1.0")
    private static func word(_ text: StaticString) -> UInt64 {
        UnsafeRawPointer(text.utf8Start).loadUnaligned(as: UInt64.self)
    }

    /// The bytes from `start` up to `end` as their own buffer.
    private func part(_ start: Int, _ end: Int) -> UnsafeBufferPointer<UInt8> {
        UnsafeBufferPointer(rebasing: bytes[start..<end])
    }

    private func requestLine(_ start: Int, _ end: Int) throws(RelayError) -> HTTPRequestHead {
        // Exactly three parts between two single spaces.
        let line = part(start, end)
        let space = UInt8(ascii: " ")
        guard let first = line.firstIndex(of: space), let second = line[(first + 1)...].firstIndex(of: space),
              !line[(second + 1)...].contains(space), first > 0, second > first + 1 else {
            throw RelayError(.badRequest, "malformed request line")
        }
        let method = UnsafeBufferPointer(rebasing: line[..<first])
        for byte in method where !HTTPRequestHead.isTokenByte(byte) { throw RelayError(.badRequest, "malformed method") }
        let version: String
        let versionBytes = UnsafeBufferPointer(rebasing: line[(second + 1)...])
        // Eight bytes, compared as one word each (a generic `elementsEqual` cost ~300).
        let versionWord = versionBytes.count == 8 ? UnsafeRawPointer(versionBytes.baseAddress!).loadUnaligned(as: UInt64.self) : 0
        switch versionWord {
        case Self.http11: version = "HTTP/1.1"
        case Self.http10: version = "HTTP/1.0"
        default: throw RelayError(.httpVersionNotSupported, "only HTTP/1.1 and HTTP/1.0 are served")
        }
        let target = UnsafeBufferPointer(rebasing: line[(first + 1)..<second])
        for byte in target where byte <= 0x20 || byte >= 0x7F {
            throw RelayError(.badRequest, "the request target has characters that must be percent-encoded")
        }
        guard target.first == UInt8(ascii: "/") else {
            throw RelayError(.badRequest, "the request target must be a path (origin-form)")
        }
        guard memchr(target.baseAddress!, Int32(UInt8(ascii: "#")), target.count) == nil else {
            throw RelayError(.badRequest, "fragment in the request target")
        }
        let question = memchr(target.baseAddress!, Int32(UInt8(ascii: "?")), target.count)
            .map { UnsafeRawPointer($0) - UnsafeRawPointer(target.baseAddress!) }
        // Every byte of the target is visible ASCII (checked above): a part without `%` is its
        // own valid text, so only a target with escapes takes `percentDecode`'s checks.
        let escaped = memchr(target.baseAddress!, Int32(UInt8(ascii: "%")), target.count) != nil
        func decoded(_ part: UnsafeBufferPointer<UInt8>, what: String) throws(RelayError) -> String {
            escaped ? try HTTPRequestHead.percentDecode(part, what: what) : String(decoding: part, as: UTF8.self)
        }
        let rawPath = UnsafeBufferPointer(rebasing: target[..<(question ?? target.count)])
        let path = try decoded(rawPath, what: "the path")
        var arguments: [HTTPRequestHead.Argument] = []
        var rawQuery: String?
        if let question {
            let query = UnsafeBufferPointer(rebasing: target[(question + 1)...])
            guard query.count <= limits.query else {
                throw RelayError(.uriTooLong, "the query is over \(limits.query) bytes")
            }
            rawQuery = String(decoding: query, as: UTF8.self)
            arguments.reserveCapacity(4)
            // `&`-separated pairs, empty ones skipped.
            var start = 0
            while start < query.count {
                let end = query[start...].firstIndex(of: UInt8(ascii: "&")) ?? query.count
                defer { start = end + 1 }
                guard end > start else { continue }
                let pair = UnsafeBufferPointer(rebasing: query[start..<end])
                let equals = pair.firstIndex(of: UInt8(ascii: "="))
                let name = try decoded(UnsafeBufferPointer(rebasing: pair[..<(equals ?? pair.count)]), what: "the query")
                let value = try equals.map { eq throws(RelayError) in
                    try decoded(UnsafeBufferPointer(rebasing: pair[(eq + 1)...]), what: "the query")
                } ?? ""
                arguments.append(.init(name: name, value: value))
            }
        }
        let isGet = method.count == 3 && method[0] == UInt8(ascii: "G") && method[1] == UInt8(ascii: "E") && method[2] == UInt8(ascii: "T")
        return HTTPRequestHead(method: isGet ? "GET" : String(decoding: method, as: UTF8.self),
                               path: path, arguments: arguments, version: version,
                               rawPath: String(decoding: rawPath, as: UTF8.self), rawQuery: rawQuery)
    }

    private func field(_ start: Int, _ end: Int) throws(RelayError) -> (name: String, value: String) {
        let line = part(start, end)
        guard let colon = line.firstIndex(of: UInt8(ascii: ":")), colon > 0 else {
            throw RelayError(.badRequest, line.first == 0x20 || line.first == 0x09
                               ? "folded header lines are not accepted" : "malformed header field")
        }
        guard let name = Self.lowercasedName(UnsafeBufferPointer(rebasing: line[..<colon])) else {
            throw RelayError(.badRequest, "malformed header name")
        }
        var from = colon + 1, to = line.count
        while from < to, line[from] == 0x20 || line[from] == 0x09 { from += 1 }
        while to > from, line[to - 1] == 0x20 || line[to - 1] == 0x09 { to -= 1 }
        let value = UnsafeBufferPointer(rebasing: line[from..<to])
        var ascii = true
        for byte in value {
            guard byte == 0x09 || (byte >= 0x20 && byte != 0x7F) else {
                throw RelayError(.badRequest, "control character in a header value")
            }
            if byte >= 0x80 { ascii = false }
        }
        // Values are Latin-1 by RFC: ASCII ones (all the relay reads) decode as they are, others
        // map byte to scalar.
        let text = ascii ? String(decoding: value, as: UTF8.self)
            : String(String.UnicodeScalarView(value.map { Unicode.Scalar($0) }))
        return (name, text)
    }

    /// `name` lowercased, nil if it is not an RFC 9110 token. Names are ASCII tokens: lowercased
    /// byte by byte (String.lowercased() is Unicode's, and costs more than the rest of the field).
    /// The common names are matched in any case without a lowered copy, and a name already in
    /// lower case is not copied before it becomes a string.
    static func lowercasedName(_ name: UnsafeBufferPointer<UInt8>) -> String? {
        var upper = false
        for byte in name {
            guard HTTPRequestHead.isTokenByte(byte) else { return nil }
            if byte &- 0x41 < 26 { upper = true }
        }
        if let common = commonName(name) { return common }
        guard upper else { return String(decoding: name, as: UTF8.self) }
        return String(unsafeUninitializedCapacity: name.count) { lowered in
            for (k, byte) in name.enumerated() { lowered[k] = byte &- 0x41 < 26 ? byte | 0x20 : byte }
            return name.count
        }
    }

    /// The names most requests carry, as literals: no string is built (or, past 15 bytes,
    /// allocated) for them. `name` is a token in any case.
    private static func commonName(_ name: UnsafeBufferPointer<UInt8>) -> String? {
        func matches(_ literal: StaticString) -> Bool {
            literal.utf8CodeUnitCount == name.count && equalIgnoringCase(name, literal)
        }
        switch name.count {
        case 4 where matches("host"): return "host"
        case 6 where matches("origin"): return "origin"
        case 6 where matches("accept"): return "accept"
        case 7 where matches("upgrade"): return "upgrade"
        case 10 where matches("connection"): return "connection"
        case 10 where matches("user-agent"): return "user-agent"
        case 12 where matches("content-type"): return "content-type"
        case 13 where matches("authorization"): return "authorization"
        case 14 where matches("content-length"): return "content-length"
        case 15 where matches("accept-encoding"): return "accept-encoding"
        case 15 where matches("x-forwarded-for"): return "x-forwarded-for"
        case 17 where matches("sec-websocket-key"): return "sec-websocket-key"
        case 17 where matches("transfer-encoding"): return "transfer-encoding"
        case 21 where matches("sec-websocket-version"): return "sec-websocket-version"
        case 22 where matches("sec-websocket-protocol"): return "sec-websocket-protocol"
        case 24 where matches("sec-websocket-extensions"): return "sec-websocket-extensions"
        default: return nil
        }
    }

    /// Whether token `name` is `literal` (lower-case letters, digits and `-`, same length) in
    /// any case, eight bytes at a time. Setting bit 0x20 folds exactly the upper-case letters
    /// onto `literal`'s bytes: the only other bytes it would fold onto them (CR onto `-`, 0x10–0x19
    /// onto digits) are no token's.
    private static func equalIgnoringCase(_ name: UnsafeBufferPointer<UInt8>, _ literal: StaticString) -> Bool {
        let a = UnsafeRawPointer(name.baseAddress!), b = UnsafeRawPointer(literal.utf8Start)
        var k = 0
        while k + 8 <= name.count {
            guard a.loadUnaligned(fromByteOffset: k, as: UInt64.self) | 0x2020_2020_2020_2020
                    == b.loadUnaligned(fromByteOffset: k, as: UInt64.self) | 0x2020_2020_2020_2020 else { return false }
            k += 8
        }
        while k < name.count {
            guard a.load(fromByteOffset: k, as: UInt8.self) | 0x20 == b.load(fromByteOffset: k, as: UInt8.self) else { return false }
            k += 1
        }
        return true
    }

    /// Refuses heads two parsers could read differently (request smuggling). One pass over the
    /// fields (filtered arrays and a set cost ~1,800 instructions a request).
    private func checkFraming(_ head: HTTPRequestHead) throws(RelayError) {
        var hosts = 0
        var length: String?
        var lengthInvalid = false
        var transferEncoding = false
        for field in head.headers {
            // By length first: most names are none of the three, and a length is one load.
            switch (field.name.utf8.count, field.name) {
            case (4, "host"):
                hosts += 1
            case (14, "content-length"):
                let value = field.value
                if value.isEmpty || value.utf8.count > 18 || !value.utf8.allSatisfy({ $0 >= 0x30 && $0 <= 0x39 })
                    || (length != nil && length != value) {
                    lengthInvalid = true
                }
                length = value
            case (17, "transfer-encoding"):
                transferEncoding = true
            default:
                break
            }
        }
        if hosts > 1 { throw RelayError(.badRequest, "more than one Host header") }
        if lengthInvalid { throw RelayError(.badRequest, "invalid Content-Length") }
        if length != nil, transferEncoding {
            throw RelayError(.badRequest, "Content-Length together with Transfer-Encoding")
        }
    }
}
