import Synchronization

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// Severity of a log line; `--log-level` / `WIMZ_LOG_LEVEL` picks the lowest one written.
public enum LogLevel: Int, Sendable, Comparable, CaseIterable {
    case debug = 0, info, warn, error

    public init?(name: String) {
        switch name.lowercased() {
        case "debug", "trace": self = .debug
        case "info", "notice": self = .info
        case "warn", "warning": self = .warn
        case "error", "err": self = .error
        default: return nil
        }
    }

    public var name: String {
        switch self {
        case .debug: return "debug"
        case .info: return "info"
        case .warn: return "warn"
        case .error: return "error"
        }
    }

    public static func < (a: LogLevel, b: LogLevel) -> Bool { a.rawValue < b.rawValue }
}

/// Structured logging: one JSON object per line on stdout, e.g.
/// `{"ts":"…","level":"info","event":"listening","address":"127.0.0.1:8080"}`.
/// journald keeps each line as one entry. Secrets must never be passed in: callers redact
/// (see `Redaction`). Thread-safe; a line is written with one `write(2)`.
public final class Logger: Sendable {
    /// The process-wide logger, set once at start-up.
    public static let shared = Logger()

    private let minimum = Atomic<Int>(LogLevel.info.rawValue)
    private let output = Mutex<Int32>(1)

    public init() {}

    public var level: LogLevel {
        get { LogLevel(rawValue: minimum.load(ordering: .relaxed)) ?? .info }
        set { minimum.store(newValue.rawValue, ordering: .relaxed) }
    }

    /// Sends lines to another file descriptor (tests, or stderr for CLI commands).
    public func redirect(toFileDescriptor fd: Int32) { output.withLock { $0 = fd } }

    public func isEnabled(_ level: LogLevel) -> Bool { level.rawValue >= minimum.load(ordering: .relaxed) }

    public func log(_ level: LogLevel, _ event: String, _ fields: [(String, JSONValue)] = []) {
        guard isEnabled(level) else { return }
        var line = "{\"ts\":"
        JSONValue.appendQuoted(Logger.timestamp(), to: &line)
        line += ",\"level\":\"\(level.name)\",\"event\":"
        JSONValue.appendQuoted(event, to: &line)
        for (key, value) in fields {
            line += ","
            JSONValue.appendQuoted(key, to: &line)
            line += ":"
            value.encode(into: &line)
        }
        line += "}\n"
        output.withLock { fd in
            var bytes = Array(line.utf8)
            var offset = 0
            while offset < bytes.count {
                let n = bytes.withUnsafeMutableBytes { write(fd, $0.baseAddress! + offset, $0.count - offset) }
                if n <= 0 { break }
                offset += n
            }
        }
    }

    public func debug(_ event: String, _ fields: [(String, JSONValue)] = []) { log(.debug, event, fields) }
    public func info(_ event: String, _ fields: [(String, JSONValue)] = []) { log(.info, event, fields) }
    public func warn(_ event: String, _ fields: [(String, JSONValue)] = []) { log(.warn, event, fields) }
    public func error(_ event: String, _ fields: [(String, JSONValue)] = []) { log(.error, event, fields) }

    /// `2026-11-22T06:20:18.123456Z`.
    static func timestamp() -> String {
        let now = UnixTime.now()
        let base = now.iso8601.dropLast()  // strip "Z"
        let micros = String(now.microseconds % 1_000_000)
        return base + "." + String(repeating: "0", count: 6 - micros.count) + micros + "Z"
    }
}

/// Keeps secrets out of logs: bearer tokens and `token=` query values.
public enum Redaction {
    /// Replaces the value of every `token=` query argument with `REDACTED`.
    public static func redactQuery(_ uri: String) -> String {
        guard uri.contains("token=") else { return uri }
        var out = ""
        var rest = Substring(uri)
        while let range = rest.firstRange(of: "token=") {
            out += rest[..<range.upperBound]
            out += "REDACTED"
            rest = rest[range.upperBound...]
            if let amp = rest.firstIndex(of: "&") { rest = rest[amp...] } else { rest = "" }
        }
        return out + rest
    }
}
