/// Severity of a log line; `--log-level` / `WIMZ_LOG_LEVEL` picks the lowest one written.
/// RelayLogging maps it to swift-log's levels (RelayCore itself does not log: the fuzzers
/// compile it on its own).
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
