#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// Wall-clock time as seconds since the Unix epoch, with microsecond precision.
/// The store's `timestamptz`, TURN expiries and ISO 8601 fields all convert through it.
public struct UnixTime: Comparable, Hashable, Sendable, CustomStringConvertible {
    public var microseconds: Int64

    public init(microseconds: Int64) { self.microseconds = microseconds }
    public init(seconds: Int64) { self.microseconds = seconds * 1_000_000 }

    public static func now() -> UnixTime {
        var ts = timespec()
        clock_gettime(CLOCK_REALTIME, &ts)
        return UnixTime(microseconds: Int64(ts.tv_sec) * 1_000_000 + Int64(ts.tv_nsec) / 1000)
    }

    public var seconds: Int64 { microseconds >= 0 ? microseconds / 1_000_000 : (microseconds - 999_999) / 1_000_000 }

    public func adding(seconds s: Int64) -> UnixTime { UnixTime(microseconds: microseconds + s * 1_000_000) }

    public static func < (a: UnixTime, b: UnixTime) -> Bool { a.microseconds < b.microseconds }

    /// `2026-11-22T16:13:20Z` (whole seconds, UTC): the wire format of every time field.
    public var iso8601: String { formatted(fractionDigits: 0) }

    /// `2026-11-22T16:13:20.123456Z`: log timestamps and `timestamptz` parameters.
    public var iso8601Microseconds: String { formatted(fractionDigits: 6) }

    /// `2026-11-22T16:13:20.123Z`: v1.6's times (timeline entries, the settings' `at`).
    public var iso8601Milliseconds: String { formatted(fractionDigits: 3) }

    /// `iso8601` in JSON quotes, appended to `out` without making the string (the app's
    /// `device_status` carries one per connection).
    public func appendQuotedISO8601(to out: inout [UInt8]) {
        withUnsafeTemporaryAllocation(of: UInt8.self, capacity: 22) { buffer in
            buffer[0] = UInt8(ascii: "\"")
            let length = write(into: UnsafeMutableBufferPointer(rebasing: buffer[1...]), fractionDigits: 0)
            buffer[length + 1] = UInt8(ascii: "\"")
            out.append(contentsOf: UnsafeBufferPointer(rebasing: buffer[..<(length + 2)]))
        }
    }

    /// Formatted into the string's own storage (no array to fill and copy).
    private func formatted(fractionDigits: Int) -> String {
        String(unsafeUninitializedCapacity: Self.length(fractionDigits: fractionDigits)) { write(into: $0, fractionDigits: fractionDigits) }
    }

    /// 20 bytes, and a point and the digits of a fraction.
    private static func length(fractionDigits: Int) -> Int { fractionDigits > 0 ? 21 + fractionDigits : 20 }

    /// Writes the time with `fractionDigits` (0, 3 or 6) digits of the second at the start of
    /// `out`, by arithmetic (no `gmtime_r`, no string interpolation): every TURN response, audit
    /// event and log line formats a time. Returns the length.
    private func write(into out: UnsafeMutableBufferPointer<UInt8>, fractionDigits: Int) -> Int {
        let secs = seconds
        let days = secs >= 0 ? secs / 86400 : (secs - 86399) / 86400
        let secondOfDay = Int(secs - days * 86400)
        let (year, month, day) = UnixTime.civilFromDays(Int(days))
        let length = Self.length(fractionDigits: fractionDigits)
        func put(_ value: Int, at offset: Int, width: Int) {
            var v = value
            for k in stride(from: offset + width - 1, through: offset, by: -1) {
                out[k] = UInt8(48 + v % 10)
                v /= 10
            }
        }
        put(year, at: 0, width: 4)
        out[4] = UInt8(ascii: "-")
        put(month, at: 5, width: 2)
        out[7] = UInt8(ascii: "-")
        put(day, at: 8, width: 2)
        out[10] = UInt8(ascii: "T")
        put(secondOfDay / 3600, at: 11, width: 2)
        out[13] = UInt8(ascii: ":")
        put(secondOfDay / 60 % 60, at: 14, width: 2)
        out[16] = UInt8(ascii: ":")
        put(secondOfDay % 60, at: 17, width: 2)
        if fractionDigits > 0 {
            out[19] = UInt8(ascii: ".")
            var divisor = 1
            for _ in fractionDigits..<6 { divisor *= 10 }
            put(Int(microseconds - secs * 1_000_000) / divisor, at: 20, width: fractionDigits)
        }
        out[length - 1] = UInt8(ascii: "Z")
        return length
    }

    /// The proleptic Gregorian date of a day count since 1970-01-01 (Howard Hinnant's algorithm).
    static func civilFromDays(_ z: Int) -> (year: Int, month: Int, day: Int) {
        let z = z + 719468
        let era = (z >= 0 ? z : z - 146096) / 146097
        let doe = z - era * 146097
        let yoe = (doe - doe / 1460 + doe / 36524 - doe / 146096) / 365
        let doy = doe - (365 * yoe + yoe / 4 - yoe / 100)
        let mp = (5 * doy + 2) / 153
        let day = doy - (153 * mp + 2) / 5 + 1
        let month = mp < 10 ? mp + 3 : mp - 9
        return (yoe + era * 400 + (month <= 2 ? 1 : 0), month, day)
    }

    /// Parses `YYYY-MM-DDTHH:MM:SS[.ffffff](Z|±HH[:MM])`, the ISO 8601 subset the API and
    /// PostgreSQL (with `timezone=UTC`, `T` or space separator) produce.
    public init?(iso8601 text: String) {
        let b = Array(text.utf8)
        func num(_ from: Int, _ count: Int) -> Int? {
            guard from + count <= b.count else { return nil }
            var v = 0
            for c in b[from..<from + count] {
                guard c >= 48, c <= 57 else { return nil }
                v = v * 10 + Int(c - 48)
            }
            return v
        }
        guard b.count >= 19, b[4] == UInt8(ascii: "-"), b[7] == UInt8(ascii: "-"),
              b[10] == UInt8(ascii: "T") || b[10] == UInt8(ascii: " "),
              b[13] == UInt8(ascii: ":"), b[16] == UInt8(ascii: ":"),
              let year = num(0, 4), let month = num(5, 2), let day = num(8, 2),
              let hour = num(11, 2), let minute = num(14, 2), let second = num(17, 2),
              (1...12).contains(month), (1...31).contains(day), hour < 24, minute < 60, second < 61
        else { return nil }
        var i = 19
        var micros = 0
        if i < b.count, b[i] == UInt8(ascii: ".") {
            i += 1
            var digits = 0
            while i < b.count, b[i] >= 48, b[i] <= 57 {
                if digits < 6 { micros = micros * 10 + Int(b[i] - 48) }
                digits += 1
                i += 1
            }
            guard digits > 0 else { return nil }
            if digits < 6 { for _ in digits..<6 { micros *= 10 } }
        }
        var offset = 0
        if i < b.count, b[i] == UInt8(ascii: "Z") {
            i += 1
        } else if i < b.count, b[i] == UInt8(ascii: "+") || b[i] == UInt8(ascii: "-") {
            let sign = b[i] == UInt8(ascii: "-") ? -1 : 1
            guard let oh = num(i + 1, 2) else { return nil }
            i += 3
            var om = 0
            if i < b.count, b[i] == UInt8(ascii: ":") { i += 1 }
            if let m = num(i, 2) { om = m; i += 2 }
            offset = sign * (oh * 3600 + om * 60)
        } else {
            return nil
        }
        guard i == b.count else { return nil }
        let days = UnixTime.daysFromCivil(year: year, month: month, day: day)
        let secs = Int64(days) * 86400 + Int64(hour * 3600 + minute * 60 + second) - Int64(offset)
        microseconds = secs * 1_000_000 + Int64(micros)
    }

    /// Days since 1970-01-01 of a proleptic Gregorian date (Howard Hinnant's algorithm).
    static func daysFromCivil(year: Int, month: Int, day: Int) -> Int {
        let y = month <= 2 ? year - 1 : year
        let era = (y >= 0 ? y : y - 399) / 400
        let yoe = y - era * 400
        let mp = (month + 9) % 12
        let doy = (153 * mp + 2) / 5 + day - 1
        let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy
        return era * 146097 + doe - 719468
    }

    public var description: String { iso8601 }
}

/// A monotonic clock for durations (never jumps with wall-clock changes).
public enum MonotonicClock {
    public static func nanoseconds() -> UInt64 {
        var ts = timespec()
        clock_gettime(CLOCK_MONOTONIC, &ts)
        return UInt64(ts.tv_sec) * 1_000_000_000 + UInt64(ts.tv_nsec)
    }
}

/// A time through `Codable` as its microseconds since the epoch (the audit spool's `*_us` fields).
extension UnixTime: Codable {
    public init(from decoder: any Decoder) throws {
        self.init(microseconds: try decoder.singleValueContainer().decode(Int64.self))
    }

    public func encode(to encoder: any Encoder) throws {
        var value = encoder.singleValueContainer()
        try value.encode(microseconds)
    }
}
