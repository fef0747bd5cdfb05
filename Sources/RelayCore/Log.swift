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
    private let output = Locked<Int32>(1)

    public init() {}

    public var level: LogLevel {
        get { LogLevel(rawValue: minimum.load(ordering: .relaxed)) ?? .info }
        set { minimum.store(newValue.rawValue, ordering: .relaxed) }
    }

    /// Sends lines to another file descriptor (tests, or stderr for CLI commands).
    public func redirect(toFileDescriptor fd: Int32) { output.withLock { $0 = fd } }

    public func isEnabled(_ level: LogLevel) -> Bool { level.rawValue >= minimum.load(ordering: .relaxed) }

    /// Writes one line if `level` is enabled; `fields` is evaluated only then.
    public func log(_ level: LogLevel, _ event: String, _ fields: @autoclosure () -> [(String, JSONValue)] = []) {
        guard isEnabled(level) else { return }
        var line: [UInt8] = []
        line.reserveCapacity(256)
        JSONValue.append("{\"ts\":", to: &line)
        JSONValue.appendQuoted(Logger.timestamp(), to: &line)
        JSONValue.append(",\"level\":\"\(level.name)\",\"event\":", to: &line)
        JSONValue.appendQuoted(event, to: &line)
        for (key, value) in fields() {
            line.append(UInt8(ascii: ","))
            JSONValue.appendQuoted(key, to: &line)
            line.append(UInt8(ascii: ":"))
            value.encode(into: &line)
        }
        JSONValue.append("}\n", to: &line)
        output.withLock { fd in
            var offset = 0
            while offset < line.count {
                let n = line.withUnsafeBytes { write(fd, $0.baseAddress! + offset, $0.count - offset) }
                if n <= 0 { break }
                offset += n
            }
        }
    }

    public func debug(_ event: String, _ fields: @autoclosure () -> [(String, JSONValue)] = []) { log(.debug, event, fields()) }
    public func info(_ event: String, _ fields: @autoclosure () -> [(String, JSONValue)] = []) { log(.info, event, fields()) }
    public func warn(_ event: String, _ fields: @autoclosure () -> [(String, JSONValue)] = []) { log(.warn, event, fields()) }
    public func error(_ event: String, _ fields: @autoclosure () -> [(String, JSONValue)] = []) { log(.error, event, fields()) }

    /// `2026-11-22T06:20:18.123456Z`.
    static func timestamp() -> String { UnixTime.now().iso8601Microseconds }
}

/// Keeps secrets out of logs: bearer tokens and `token=` query values.
public enum Redaction {
    /// The token of an `Authorization: Bearer <token>` value (scheme case-insensitive), nil for
    /// any other scheme or an empty token.
    public static func bearerToken(fromAuthorization header: String) -> String? {
        let parts = header.split(separator: " ", maxSplits: 1)
        guard parts.count == 2, parts[0].lowercased() == "bearer" else { return nil }
        let token = String(parts[1].drop { $0 == " " })
        return token.isEmpty ? nil : token
    }

    /// Replaces the value of every `token=` query argument with `REDACTED`.
    public static func redactQuery(_ uri: String) -> String {
        let marker = Array("token=".utf8)
        let bytes = Array(uri.utf8)
        guard bytes.count >= marker.count else { return uri }
        var out: [UInt8] = []
        var i = 0
        var changed = false
        while i < bytes.count {
            if bytes[i] == marker[0], i + marker.count <= bytes.count, bytes[i..<i + marker.count].elementsEqual(marker) {
                out += marker
                out += Array("REDACTED".utf8)
                i += marker.count
                while i < bytes.count, bytes[i] != UInt8(ascii: "&") { i += 1 }
                changed = true
            } else {
                out.append(bytes[i])
                i += 1
            }
        }
        return changed ? String(decoding: out, as: UTF8.self) : uri
    }
}
