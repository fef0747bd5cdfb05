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

    public var encoded: String {
        var out = ""
        encode(into: &out)
        return out
    }

    public func encode(into out: inout String) {
        switch self {
        case .null: out += "null"
        case .bool(let b): out += b ? "true" : "false"
        case .int(let i): out += String(i)
        case .double(let d): out += d.isFinite ? String(d) : "null"
        case .string(let s): JSONValue.appendQuoted(s, to: &out)
        case .raw(let r): out += r
        case .array(let items):
            out += "["
            for (i, item) in items.enumerated() {
                if i > 0 { out += "," }
                item.encode(into: &out)
            }
            out += "]"
        case .object(let fields):
            out += "{"
            for (i, (key, value)) in fields.enumerated() {
                if i > 0 { out += "," }
                JSONValue.appendQuoted(key, to: &out)
                out += ":"
                value.encode(into: &out)
            }
            out += "}"
        }
    }

    /// Appends `s` as a JSON string literal, escaping quotes, backslashes and control characters.
    public static func appendQuoted(_ s: String, to out: inout String) {
        out += "\""
        var plainStart = s.unicodeScalars.startIndex
        var index = plainStart
        let scalars = s.unicodeScalars
        while index != scalars.endIndex {
            let c = scalars[index]
            let escape: String?
            switch c {
            case "\"": escape = "\\\""
            case "\\": escape = "\\\\"
            case "\n": escape = "\\n"
            case "\r": escape = "\\r"
            case "\t": escape = "\\t"
            default:
                if c.value < 0x20 || c.value == 0x2028 || c.value == 0x2029 {
                    let hex = String(c.value, radix: 16)
                    escape = "\\u" + String(repeating: "0", count: 4 - hex.count) + hex
                } else {
                    escape = nil
                }
            }
            if let escape {
                out.unicodeScalars.append(contentsOf: scalars[plainStart..<index])
                out += escape
                plainStart = scalars.index(after: index)
            }
            index = scalars.index(after: index)
        }
        out.unicodeScalars.append(contentsOf: scalars[plainStart..<scalars.endIndex])
        out += "\""
    }

    public static func == (a: JSONValue, b: JSONValue) -> Bool { a.encoded == b.encoded }
}
