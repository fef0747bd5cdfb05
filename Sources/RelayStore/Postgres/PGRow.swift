import RelayCore

/// One row of a result, read by column name with its type parsed once: a column the statement
/// does not return, or a value its type does not take, throws `.schema` naming the column — a
/// test finds it, not a customer — and a new column in the middle of a SELECT shifts nothing.
/// NULL is an error for the non-optional readers.
public struct PGRow: Sendable {
    private let values: [String?]
    private let index: ColumnIndex

    init(_ values: [String?], _ index: ColumnIndex) {
        self.values = values
        self.index = index
    }

    /// The text of `column`, nil for NULL.
    public func optionalString(_ column: String) throws -> String? {
        guard let i = index.position[column] else { throw StoreError(.schema, "the result has no column \(column)") }
        return values[i]
    }

    public func string(_ column: String) throws -> String {
        try required(column, optionalString(column))
    }

    public func optionalInt64(_ column: String) throws -> Int64? {
        try optionalString(column).map { try parsed(column, Int64($0), "an integer") }
    }

    public func int64(_ column: String) throws -> Int64 { try required(column, optionalInt64(column)) }

    public func int(_ column: String) throws -> Int { Int(try int64(column)) }

    public func double(_ column: String) throws -> Double { try parsed(column, Double(try string(column)), "a number") }

    /// PostgreSQL's `t`/`f`.
    public func bool(_ column: String) throws -> Bool { try required(column, optionalBool(column)) }

    public func optionalBool(_ column: String) throws -> Bool? {
        try optionalString(column).map { text in
            switch text {
            case "t": return true
            case "f": return false
            default: throw StoreError(.schema, "column \(column) is not a boolean")
            }
        }
    }

    public func optionalTime(_ column: String) throws -> UnixTime? {
        try optionalString(column).map { try parsed(column, UnixTime(iso8601: $0), "a time") }
    }

    public func time(_ column: String) throws -> UnixTime { try required(column, optionalTime(column)) }

    /// A `bytea` in hex output.
    public func bytes(_ column: String) throws -> [UInt8] {
        try parsed(column, PGValue.bytes(fromBytea: try string(column)), "bytea")
    }

    public func deviceID(_ column: String) throws -> DeviceID { try parsed(column, DeviceID(try string(column)), "a device id") }

    /// A value of a `String`-backed enum (role, access, kind, …).
    public func value<T: RawRepresentable>(_ column: String, as type: T.Type = T.self) throws -> T where T.RawValue == String {
        try parsed(column, T(rawValue: try string(column)), "a \(T.self)")
    }

    public func optionalValue<T: RawRepresentable>(_ column: String, as type: T.Type = T.self) throws -> T? where T.RawValue == String {
        try optionalString(column).map { try parsed(column, T(rawValue: $0), "a \(T.self)") }
    }

    private func required<T>(_ column: String, _ value: T?) throws -> T {
        guard let value else { throw StoreError(.schema, "column \(column) is NULL") }
        return value
    }

    private func parsed<T>(_ column: String, _ value: T?, _ what: String) throws -> T {
        guard let value else { throw StoreError(.schema, "column \(column) is not \(what)") }
        return value
    }
}

/// Column names to positions, shared by a result's rows.
final class ColumnIndex: Sendable {
    let position: [String: Int]

    init(_ columns: [String]) {
        // The first of two equal names wins (`SELECT t.id, d.id` would need an alias anyway).
        var position: [String: Int] = [:]
        for (i, name) in columns.enumerated() where position[name] == nil { position[name] = i }
        self.position = position
    }
}

extension PGRows {
    /// The rows, read by column name.
    public var records: [PGRow] {
        let index = ColumnIndex(columns)
        return rows.map { PGRow($0, index) }
    }

    /// The first row, read by column name.
    public var firstRecord: PGRow? { rows.first.map { PGRow($0, ColumnIndex(columns)) } }

    /// The one row a statement must return (`RETURNING` of a row it wrote).
    public func single() throws -> PGRow {
        guard let row = firstRecord else { throw StoreError(.schema, "the statement returned no row") }
        return row
    }
}
