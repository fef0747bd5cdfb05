import RelayCore

/// One statement and its parameters, written as SQL with the values in place:
/// `"SELECT … FROM tokens t WHERE t.id = \(id) AND t.control = \(control)"` is sent as `… $1 … $2`
/// with `id` and `control` bound, each encoded once by its type (``PGBindable``, arrays of
/// ``PGArrayElement`` in PostgreSQL's binary format). A value is never spliced into the text.
/// SQL of the relay's own — a column list, a lock clause, a condition the caller chose — is a
/// `PGQuery` too, interpolated as SQL with its own values numbered in. As postgres-nio's
/// `PostgresQuery` does it.
public struct PGQuery: Sendable, ExpressibleByStringInterpolation {
    /// The text between the values, and where each value stands (its index in `parameters`).
    private let segments: [Segment]
    let parameters: [PGParameter]

    enum Segment: Sendable {
        case text(String)
        case parameter(Int)
    }

    /// The statement's text, with `$1`, `$2`, … where the values go.
    public var sql: String {
        segments.reduce(into: "") { sql, segment in
            switch segment {
            case .text(let text): sql += text
            case .parameter(let index): sql += "$\(index + 1)"
            }
        }
    }

    public init(stringLiteral sql: String) {
        segments = [.text(sql)]
        parameters = []
    }

    public init(stringInterpolation: Interpolation) {
        segments = stringInterpolation.segments
        parameters = stringInterpolation.parameters
    }

    /// Text that is run as it is, with no parameters: SQL the relay or a test makes at run time
    /// from names of its own (a test database's name, a table of the retention list), never from
    /// input.
    public init(unsafeSQL sql: String) {
        segments = [.text(sql)]
        parameters = []
    }

    public struct Interpolation: StringInterpolationProtocol {
        var segments: [Segment] = []
        var parameters: [PGParameter] = []

        public init(literalCapacity: Int, interpolationCount: Int) {
            segments.reserveCapacity(2 * interpolationCount + 1)
        }

        public mutating func appendLiteral(_ literal: String) { segments.append(.text(literal)) }

        private mutating func bind(_ parameter: PGParameter) {
            segments.append(.parameter(parameters.count))
            parameters.append(parameter)
        }

        /// A part of a statement made apart (a column list, a condition chosen by the caller):
        /// its text as SQL, its values numbered after those before it.
        public mutating func appendInterpolation(_ part: PGQuery) {
            let offset = parameters.count
            for segment in part.segments {
                switch segment {
                case .text: segments.append(segment)
                case .parameter(let index): segments.append(.parameter(index + offset))
                }
            }
            parameters += part.parameters
        }

        public mutating func appendInterpolation<Value: PGBindable>(_ value: Value) { bind(value.pgParameter) }

        /// nil is SQL NULL.
        public mutating func appendInterpolation<Value: PGBindable>(_ value: Value?) { bind(value?.pgParameter ?? .null) }

        /// A `String`-backed enum (a role, an access level, an audit kind) as its raw value.
        public mutating func appendInterpolation<Value: RawRepresentable>(_ value: Value) where Value.RawValue == String {
            bind(.text(value.rawValue))
        }

        public mutating func appendInterpolation<Value: RawRepresentable>(_ value: Value?) where Value.RawValue == String {
            bind(value.map { .text($0.rawValue) } ?? .null)
        }

        /// A one-dimensional array, in binary (the server parses nothing: one statement text
        /// whatever the batch's size).
        public mutating func appendInterpolation<Element: PGArrayElement>(_ values: [Element]) {
            bind(.binary(Element.pgArray(values.map(Optional.some))))
        }

        /// An array with NULL elements.
        public mutating func appendInterpolation<Element: PGArrayElement>(_ values: [Element?]) {
            bind(.binary(Element.pgArray(values)))
        }

        /// An array, or NULL.
        public mutating func appendInterpolation<Element: PGArrayElement>(_ values: [Element]?) {
            bind(values.map { .binary(Element.pgArray($0.map(Optional.some))) } ?? .null)
        }

        /// A name (a `LISTEN` channel, a database), quoted as an identifier: whatever it holds,
        /// it can only name.
        public mutating func appendInterpolation(identifier name: String) {
            segments.append(.text("\"" + name.replacingOccurrences(of: "\"", with: "\"\"") + "\""))
        }
    }
}

/// One bound parameter: text (PostgreSQL reads it by the type its place has), binary (an array in
/// `array_recv`'s format, whose element type it names), or NULL.
public struct PGParameter: Sendable {
    enum Value: Sendable {
        case text(String)
        case binary([UInt8])
        case null
    }

    let value: Value

    static func text(_ text: String) -> PGParameter { PGParameter(value: .text(text)) }
    static func binary(_ bytes: [UInt8]) -> PGParameter { PGParameter(value: .binary(bytes)) }
    static let null = PGParameter(value: .null)
}

/// A value bound as one parameter, in its one text form.
public protocol PGBindable {
    var pgParameter: PGParameter { get }
}

extension String: PGBindable {
    public var pgParameter: PGParameter { .text(self) }
}

extension Int64: PGBindable {
    public var pgParameter: PGParameter { .text(String(self)) }
}

extension Int: PGBindable {
    public var pgParameter: PGParameter { .text(String(self)) }
}

extension Int32: PGBindable {
    public var pgParameter: PGParameter { .text(String(self)) }
}

extension Double: PGBindable {
    public var pgParameter: PGParameter { .text(String(self)) }
}

/// A boolean is written one way: PostgreSQL's own `t` and `f`.
extension Bool: PGBindable {
    public var pgParameter: PGParameter { .text(self ? "t" : "f") }
}

/// A time as UTC ISO 8601 with microseconds (every connection runs in UTC: `PGConnection`).
extension UnixTime: PGBindable {
    public var pgParameter: PGParameter { .text(iso8601Microseconds) }
}

extension DeviceID: PGBindable {
    public var pgParameter: PGParameter { .text(rawValue) }
}

/// JSON as its text, for a `jsonb` place.
extension JSONValue: PGBindable {
    public var pgParameter: PGParameter { .text(encoded) }
}

/// Bytes are a `bytea`, in its `\x…` hex form.
extension Array: PGBindable where Element == UInt8 {
    public var pgParameter: PGParameter { .text(PGValue.byteaText(self)) }
}

/// What may be an element of an array parameter, with the array's binary form.
public protocol PGArrayElement {
    static func pgArray(_ values: [Self?]) -> [UInt8]
}

extension String: PGArrayElement {
    public static func pgArray(_ values: [String?]) -> [UInt8] { PGBinaryArray.texts(values) }
}

extension DeviceID: PGArrayElement {
    public static func pgArray(_ values: [DeviceID?]) -> [UInt8] { PGBinaryArray.texts(values.map { $0?.rawValue }) }
}

extension Int64: PGArrayElement {
    public static func pgArray(_ values: [Int64?]) -> [UInt8] { PGBinaryArray.int8s(values) }
}

extension Int32: PGArrayElement {
    public static func pgArray(_ values: [Int32?]) -> [UInt8] { PGBinaryArray.int4s(values) }
}

extension UnixTime: PGArrayElement {
    public static func pgArray(_ values: [UnixTime?]) -> [UInt8] { PGBinaryArray.timestamps(values) }
}

extension JSONValue: PGArrayElement {
    public static func pgArray(_ values: [JSONValue?]) -> [UInt8] { PGBinaryArray.jsonb(values) }
}

extension UUIDValue: PGArrayElement {
    public static func pgArray(_ values: [UUIDValue?]) -> [UInt8] { PGBinaryArray.uuids(values) }
}

/// `bytea[]`: each element's bytes as they are.
extension Array: PGArrayElement where Element == UInt8 {
    public static func pgArray(_ values: [[UInt8]?]) -> [UInt8] { PGBinaryArray.byteas(values) }
}
