import RelayCore

/// One-dimensional arrays in PostgreSQL's binary format, for the batch statements that run per
/// connection (audit rows, presence rows). The server reads them without parsing text: a
/// 500-row audit batch in text spent about half of its insert's time in `array_in` and the
/// element parsers (docs/performance.md, session 19). Wire format (`array_recv`), all integers
/// big-endian: dimensions (1), has-nulls flag, element type OID, then the dimension's length and
/// lower bound (1), then each element as a 4-byte length (-1 for NULL) and its bytes.
enum PGBinaryArray {
    /// Element type OIDs (`pg_type.oid`, fixed since the types were built in).
    enum ElementType: UInt32 {
        case bytea = 17
        case int4 = 23
        case int8 = 20
        case text = 25
        case timestamptz = 1184
        case uuid = 2950
        case jsonb = 3802
    }

    static func encode<Element>(_ elements: [Element?], as type: ElementType,
                                _ write: (Element, inout [UInt8]) -> Void) -> [UInt8] {
        var out: [UInt8] = []
        out.reserveCapacity(20 + elements.count * 24)
        append(Int32(1), to: &out)
        append(Int32(elements.contains { $0 == nil } ? 1 : 0), to: &out)
        append(Int32(bitPattern: type.rawValue), to: &out)
        append(Int32(elements.count), to: &out)
        append(Int32(1), to: &out)
        for element in elements {
            guard let element else { append(Int32(-1), to: &out); continue }
            let lengthAt = out.count
            append(Int32(0), to: &out)
            write(element, &out)
            let length = Int32(out.count - lengthAt - 4).bigEndian
            out.withUnsafeMutableBytes { $0.storeBytes(of: length, toByteOffset: lengthAt, as: Int32.self) }
        }
        return out
    }

    static func texts(_ values: [String?]) -> [UInt8] {
        encode(values, as: .text) { $1.append(contentsOf: $0.utf8) }
    }

    /// bytea's binary form is its bytes: a token lookup's digests, 32 bytes each, as they are.
    static func byteas(_ values: [[UInt8]?]) -> [UInt8] {
        encode(values, as: .bytea) { $1.append(contentsOf: $0) }
    }

    static func int8s(_ values: [Int64?]) -> [UInt8] {
        encode(values, as: .int8) { append($0, to: &$1) }
    }

    static func int4s(_ values: [Int32?]) -> [UInt8] {
        encode(values, as: .int4) { append($0, to: &$1) }
    }

    /// Microseconds since 2000-01-01 00:00 UTC, the server's own form of a timestamp.
    static func timestamps(_ values: [UnixTime?]) -> [UInt8] {
        encode(values, as: .timestamptz) { append($0.microseconds - postgresEpochMicroseconds, to: &$1) }
    }

    /// jsonb's binary input is a version byte (1) and the JSON text, encoded straight into the
    /// array (no intermediate string per value).
    static func jsonb(_ values: [JSONValue?]) -> [UInt8] {
        encode(values, as: .jsonb) { value, out in
            out.append(1)
            value.encode(into: &out)
        }
    }

    /// UUIDs as their 16 bytes each. Every audit event's id passes here.
    static func uuids(_ values: [UUIDValue?]) -> [UInt8] {
        encode(values, as: .uuid) { $0.append(to: &$1) }
    }

    /// 2000-01-01 00:00:00 UTC in Unix microseconds.
    static let postgresEpochMicroseconds: Int64 = 946_684_800_000_000

    private static func append<T: FixedWidthInteger>(_ value: T, to out: inout [UInt8]) {
        withUnsafeBytes(of: value.bigEndian) { out.append(contentsOf: $0) }
    }
}
