import Foundation

/// Any JSON value: command parameters, response data and the raw `data` of every event.
///
/// A whole number that fits 64 bits is an `integer`, kept exact (an id above 2^53 does not change
/// on its way through); any other number is a `number`. The two compare by value: `.integer(1)`
/// equals `.number(1.0)`.
public enum JSON: Sendable, Hashable, Codable {
    case null
    case bool(Bool)
    case integer(Int64)
    case number(Double)
    case string(String)
    case array([JSON])
    case object([String: JSON])

    public init(from decoder: any Decoder) throws {
        let container = try decoder.singleValueContainer()
        if container.decodeNil() { self = .null }
        else if let value = try? container.decode(Bool.self) { self = .bool(value) }
        else if let value = try? container.decode(Int64.self) { self = .integer(value) }
        else if let value = try? container.decode(Double.self) { self = .number(value) }
        else if let value = try? container.decode(String.self) { self = .string(value) }
        else if let value = try? container.decode([JSON].self) { self = .array(value) }
        else { self = .object(try container.decode([String: JSON].self)) }
    }

    public func encode(to encoder: any Encoder) throws {
        var container = encoder.singleValueContainer()
        switch self {
        case .null: try container.encodeNil()
        case .bool(let value): try container.encode(value)
        case .integer(let value): try container.encode(value)
        case .number(let value): try container.encode(value)
        case .string(let value): try container.encode(value)
        case .array(let value): try container.encode(value)
        case .object(let value): try container.encode(value)
        }
    }

    /// The member `key` of an object (nil otherwise).
    public subscript(key: String) -> JSON? {
        if case .object(let members) = self { return members[key] }
        return nil
    }

    /// The string, if this is one.
    public var stringValue: String? { if case .string(let v) = self { v } else { nil } }
    /// The number, if this is one (an integer beyond 2^53 rounded to the nearest `Double`).
    public var doubleValue: Double? {
        switch self {
        case .integer(let v): Double(v)
        case .number(let v): v
        default: nil
        }
    }
    /// The number, if this is a whole one that fits 64 bits: exact.
    public var int64Value: Int64? {
        switch self {
        case .integer(let v): v
        case .number(let v): Int64(exactly: v)
        default: nil
        }
    }
    /// The number, if this is a whole one that fits an `Int`: exact.
    public var intValue: Int? { int64Value.flatMap { Int(exactly: $0) } }
    /// The boolean, if this is one.
    public var boolValue: Bool? { if case .bool(let v) = self { v } else { nil } }

    /// Parses UTF-8 JSON text.
    public init(parsing text: String) throws {
        self = try JSONDecoder().decode(JSON.self, from: Data(text.utf8))
    }

    /// Compact JSON text.
    public var text: String {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys, .withoutEscapingSlashes]
        return String(decoding: (try? encoder.encode(self)) ?? Data("null".utf8), as: UTF8.self)
    }
}

extension JSON: ExpressibleByStringLiteral, ExpressibleByIntegerLiteral, ExpressibleByFloatLiteral,
    ExpressibleByBooleanLiteral, ExpressibleByArrayLiteral, ExpressibleByDictionaryLiteral, ExpressibleByNilLiteral {
    public init(stringLiteral value: String) { self = .string(value) }
    public init(integerLiteral value: Int) { self = .integer(Int64(value)) }
    public init(floatLiteral value: Double) { self = .number(value) }
    public init(booleanLiteral value: Bool) { self = .bool(value) }
    public init(arrayLiteral elements: JSON...) { self = .array(elements) }
    public init(dictionaryLiteral elements: (String, JSON)...) {
        self = .object(Dictionary(elements, uniquingKeysWith: { _, last in last }))
    }
    public init(nilLiteral: ()) { self = .null }
}

extension JSON {
    /// Numbers by value (`.integer(1) == .number(1.0)`); everything else by case and contents.
    public static func == (lhs: JSON, rhs: JSON) -> Bool {
        switch (lhs, rhs) {
        case (.null, .null): true
        case (.bool(let a), .bool(let b)): a == b
        case (.integer(let a), .integer(let b)): a == b
        case (.number(let a), .number(let b)): a == b
        case (.integer(let a), .number(let b)), (.number(let b), .integer(let a)): Int64(exactly: b) == a
        case (.string(let a), .string(let b)): a == b
        case (.array(let a), .array(let b)): a == b
        case (.object(let a), .object(let b)): a == b
        default: false
        }
    }

    public func hash(into hasher: inout Hasher) {
        switch self {
        case .null: hasher.combine(0)
        case .bool(let v): hasher.combine(1); hasher.combine(v)
        case .integer(let v): hasher.combine(2); hasher.combine(v)
        case .number(let v):
            // A whole number hashes as the integer it equals.
            if let whole = Int64(exactly: v) { hasher.combine(2); hasher.combine(whole) } else { hasher.combine(3); hasher.combine(v) }
        case .string(let v): hasher.combine(4); hasher.combine(v)
        case .array(let v): hasher.combine(5); hasher.combine(v)
        case .object(let v): hasher.combine(6); hasher.combine(v)
        }
    }
}
