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
    public var iso8601: String {
        var t = time_t(seconds)
        var parts = tm()
        gmtime_r(&t, &parts)
        func pad(_ v: Int32, _ width: Int) -> String {
            let s = String(v)
            return String(repeating: "0", count: max(0, width - s.count)) + s
        }
        return "\(pad(parts.tm_year + 1900, 4))-\(pad(parts.tm_mon + 1, 2))-\(pad(parts.tm_mday, 2))T"
            + "\(pad(parts.tm_hour, 2)):\(pad(parts.tm_min, 2)):\(pad(parts.tm_sec, 2))Z"
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
