/// A JSON value for what the relay itself writes: logs, HTTP bodies, relay-originated
/// frames. Encoding is hand-written (no Foundation) and always produces compact UTF-8 with
/// keys in the given order, so output is stable and cheap.
public enum JSONValue: Sendable, Equatable, ExpressibleByStringLiteral, ExpressibleByIntegerLiteral,
    ExpressibleByBooleanLiteral, ExpressibleByArrayLiteral
{
    case null
    case bool(Bool)
    case int(Int64)
    case double(Double)
    case string(String)
    case array([JSONValue])
    /// Key order is kept as given.
    case object([(String, JSONValue)])
    /// Already-encoded JSON, copied verbatim (e.g. a robot's stored event).
    case raw(String)

    public init(stringLiteral value: String) { self = .string(value) }
    public init(integerLiteral value: Int) { self = .int(Int64(value)) }
    public init(booleanLiteral value: Bool) { self = .bool(value) }
    public init(arrayLiteral elements: JSONValue...) { self = .array(elements) }

    /// `nil` becomes `null`.
    public static func optional(_ s: String?) -> JSONValue { s.map(JSONValue.string) ?? .null }

    public var encoded: String { String(decoding: encodedBytes, as: UTF8.self) }

    /// The compact UTF-8 encoding.
    public var encodedBytes: [UInt8] {
        var out: [UInt8] = []
        out.reserveCapacity(128)
        encode(into: &out)
        return out
    }

    /// Appends the compact UTF-8 encoding to `out`. Works on bytes: this runs per HTTP
    /// response, audit event and relay-originated frame, where a `String`-based encoder
    /// (one Unicode scalar at a time) was the largest cost of the TURN endpoint.
    public func encode(into out: inout [UInt8]) {
        switch self {
        case .null: JSONValue.append("null", to: &out)
        case .bool(let b): JSONValue.append(b ? "true" : "false", to: &out)
        case .int(let i): JSONValue.appendDecimal(i, to: &out)
        case .double(let d): JSONValue.appendNumber(d, to: &out)
        case .string(let s): JSONValue.appendQuoted(s, to: &out)
        case .raw(let r): JSONValue.append(r, to: &out)
        case .array(let items):
            out.append(UInt8(ascii: "["))
            for (i, item) in items.enumerated() {
                if i > 0 { out.append(UInt8(ascii: ",")) }
                item.encode(into: &out)
            }
            out.append(UInt8(ascii: "]"))
        case .object(let fields):
            out.append(UInt8(ascii: "{"))
            for (i, (key, value)) in fields.enumerated() {
                if i > 0 { out.append(UInt8(ascii: ",")) }
                JSONValue.appendQuoted(key, to: &out)
                out.append(UInt8(ascii: ":"))
                value.encode(into: &out)
            }
            out.append(UInt8(ascii: "}"))
        }
    }

    /// Appends `s`'s UTF-8 bytes unchanged.
    @inline(__always)
    public static func append(_ s: String, to out: inout [UInt8]) {
        var s = s
        s.withUTF8 { out.append(contentsOf: $0) }
    }

    /// Appends a literal's bytes as they are (a `String`'s UTF-8 view goes through the generic
    /// append); for the relay's own fixed JSON text, which needs no escaping.
    @inline(__always)
    public static func appendLiteral(_ text: StaticString, to out: inout [UInt8]) {
        out.append(contentsOf: UnsafeBufferPointer(start: text.utf8Start, count: text.utf8CodeUnitCount))
    }

    private static let hexDigits: [UInt8] = Array("0123456789abcdef".utf8)

    /// Appends `s` as a JSON string literal, escaping quotes, backslashes, control characters
    /// and U+2028/U+2029 (which break JavaScript parsers); runs of plain bytes are copied whole.
    public static func appendQuoted(_ s: String, to out: inout [UInt8]) {
        out.append(UInt8(ascii: "\""))
        var s = s
        s.withUTF8 { bytes in
            // Most strings need no escape at all: one pass to see, one copy.
            if !bytes.contains(where: { $0 == UInt8(ascii: "\"") || $0 == UInt8(ascii: "\\") || $0 < 0x20 || $0 == 0xE2 }) {
                out.append(contentsOf: bytes)
                return
            }
            var plainStart = 0
            var i = 0
            while i < bytes.count {
                let c = bytes[i]
                var escape: (UInt8, UInt8)? = nil  // a two-byte escape, or nil with `unicode` set
                var unicode: UInt32? = nil
                var width = 1
                switch c {
                case UInt8(ascii: "\""): escape = (UInt8(ascii: "\\"), UInt8(ascii: "\""))
                case UInt8(ascii: "\\"): escape = (UInt8(ascii: "\\"), UInt8(ascii: "\\"))
                case UInt8(ascii: "\n"): escape = (UInt8(ascii: "\\"), UInt8(ascii: "n"))
                case UInt8(ascii: "\r"): escape = (UInt8(ascii: "\\"), UInt8(ascii: "r"))
                case UInt8(ascii: "\t"): escape = (UInt8(ascii: "\\"), UInt8(ascii: "t"))
                case 0..<0x20: unicode = UInt32(c)
                case 0xE2 where i + 2 < bytes.count && bytes[i + 1] == 0x80 && (bytes[i + 2] == 0xA8 || bytes[i + 2] == 0xA9):
                    unicode = bytes[i + 2] == 0xA8 ? 0x2028 : 0x2029
                    width = 3
                default:
                    i += 1
                    continue
                }
                out.append(contentsOf: UnsafeBufferPointer(rebasing: bytes[plainStart..<i]))
                if let (a, b) = escape {
                    out.append(a)
                    out.append(b)
                } else if let u = unicode {
                    let hex = hexDigits
                    out.append(contentsOf: [UInt8(ascii: "\\"), UInt8(ascii: "u"), hex[Int(u >> 12 & 0xf)], hex[Int(u >> 8 & 0xf)],
                                            hex[Int(u >> 4 & 0xf)], hex[Int(u & 0xf)]])
                }
                i += width
                plainStart = i
            }
            out.append(contentsOf: UnsafeBufferPointer(rebasing: bytes[plainStart..<bytes.count]))
        }
        out.append(UInt8(ascii: "\""))
    }

    public static func == (a: JSONValue, b: JSONValue) -> Bool { a.encodedBytes == b.encodedBytes }
}
