import Logging
import RelayCore
import Synchronization

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// Where the relay's log lines go and the lowest level written: one per process, shared by
/// every `JSONLogHandler`, so `--log-level` (and a test's redirect) applies to all loggers at
/// once, including those made before it was set.
public final class LogSink: Sendable {
    private let minimum: Atomic<UInt8>
    /// The descriptor, under the lock every line is written with.
    private let output: Locked<Int32>

    public init(level: Logger.Level = .info, fileDescriptor: Int32 = 1) {
        minimum = Atomic(level.rank)
        output = Locked(fileDescriptor)
    }

    /// Read by every log call, emitted or not (swift-log asks the handler first): one atomic
    /// load and a switch, no allocation.
    public var level: Logger.Level {
        get { Logger.Level(rank: minimum.load(ordering: .relaxed)) }
        set { minimum.store(newValue.rank, ordering: .relaxed) }
    }

    /// Writes one whole line with one `write(2)` per chunk, under the lock, so lines from
    /// several threads never interleave.
    func writeLine(_ line: [UInt8]) {
        output.withLock { fd in
            var offset = 0
            while offset < line.count {
                let n = line.withUnsafeBytes { write(fd, $0.baseAddress! + offset, $0.count - offset) }
                if n <= 0 { break }
                offset += n
            }
        }
    }
}

/// swift-log's handler for the relay's line format: one JSON object per line, e.g.
/// `{"ts":"2026-11-22T06:20:18.123456Z","level":"info","event":"listening","address":"127.0.0.1:8080"}`.
/// The message is the event's name; metadata follows in key order. Numbers and booleans passed as
/// `.stringConvertible` stay JSON numbers and booleans. journald keeps each line as one entry.
///
/// Secrets never reach a line: any `token=` query value inside a string is replaced by
/// `REDACTED`, and so is the whole value of a key named `token` or `authorization`.
public struct JSONLogHandler: LogHandler {
    public var metadata: Logger.Metadata = [:]
    private let sink: LogSink

    public init(sink: LogSink) { self.sink = sink }

    /// The sink's level: setting it changes every logger of the process.
    public var logLevel: Logger.Level {
        get { sink.level }
        set { sink.level = newValue }
    }

    public subscript(metadataKey key: String) -> Logger.Metadata.Value? {
        get { metadata[key] }
        set { metadata[key] = newValue }
    }

    public func log(event: LogEvent) {
        sink.writeLine(Self.line(level: event.level, message: event.message.description,
                             metadata: metadata.merging(event.metadata ?? [:]) { $1 }, time: UnixTime.now()))
    }

    /// One encoded line (with its newline).
    static func line(level: Logger.Level, message: String, metadata: Logger.Metadata, time: UnixTime) -> [UInt8] {
        var line: [UInt8] = []
        line.reserveCapacity(256)
        JSONValue.append("{\"ts\":", to: &line)
        JSONValue.appendQuoted(time.iso8601Microseconds, to: &line)
        JSONValue.append(",\"level\":\"\(level.lineName)\",\"event\":", to: &line)
        JSONValue.appendQuoted(message, to: &line)
        for (key, value) in metadata.sorted(by: { $0.key < $1.key }) {
            line.append(UInt8(ascii: ","))
            JSONValue.appendQuoted(key, to: &line)
            line.append(UInt8(ascii: ":"))
            let secret = key == "token" || key == "authorization"
            (secret ? .string("REDACTED") : json(value)).encode(into: &line)
        }
        JSONValue.append("}\n", to: &line)
        return line
    }

    static func json(_ value: Logger.MetadataValue) -> JSONValue {
        switch value {
        case .string(let text): return .string(Redaction.redactQuery(text))
        case .stringConvertible(let item):
            switch item {
            case let n as Int: return .int(Int64(n))
            case let n as Int64: return .int(n)
            case let n as Int32: return .int(Int64(n))
            case let n as UInt64: return n <= UInt64(Int64.max) ? .int(Int64(n)) : .string(String(n))
            case let n as UInt: return n <= UInt(Int64.max) ? .int(Int64(n)) : .string(String(n))
            case let n as Double: return .double(n)
            case let b as Bool: return .bool(b)
            default: return .string(Redaction.redactQuery(item.description))
            }
        case .array(let items): return .array(items.map(json))
        case .dictionary(let entries): return .object(entries.sorted { $0.key < $1.key }.map { ($0.key, json($0.value)) })
        }
    }
}

extension Logger.Level {
    /// The relay's four level names (the format predates swift-log): trace is debug, notice is
    /// info, critical is error.
    var lineName: String {
        switch self {
        case .trace, .debug: return "debug"
        case .info, .notice: return "info"
        case .warning: return "warn"
        case .error, .critical: return "error"
        }
    }

    /// The level's place from trace (0) to critical (6).
    var rank: UInt8 {
        switch self {
        case .trace: return 0
        case .debug: return 1
        case .info: return 2
        case .notice: return 3
        case .warning: return 4
        case .error: return 5
        case .critical: return 6
        }
    }

    init(rank: UInt8) {
        switch rank {
        case 0: self = .trace
        case 1: self = .debug
        case 2: self = .info
        case 3: self = .notice
        case 4: self = .warning
        case 5: self = .error
        default: self = .critical
        }
    }

    /// The level `--log-level` / `WIMZ_LOG_LEVEL` names.
    public init(_ level: LogLevel) {
        switch level {
        case .debug: self = .debug
        case .info: self = .info
        case .warn: self = .warning
        case .error: self = .error
        }
    }
}

/// The process's logging set-up.
public enum RelayLogging {
    /// The sink every relay logger writes to once `bootstrap` ran.
    public static let sink = LogSink()

    private static let bootstrapped = Atomic<Bool>(false)

    /// Makes `JSONLogHandler` on `sink` the handler of every `Logger` made from now on (once per
    /// process; later calls only set the level).
    public static func bootstrap(level: LogLevel) {
        sink.level = Logger.Level(level)
        if bootstrapped.compareExchange(expected: false, desired: true, ordering: .relaxed).exchanged {
            LoggingSystem.bootstrap { _ in JSONLogHandler(sink: sink) }
        }
    }
}

extension Logger.Metadata {
    /// Metadata from fields built for other JSON (an audit event's details, say).
    public init(fields: [(String, JSONValue)]) {
        self.init(fields.map { ($0.0, Logger.MetadataValue($0.1)) }, uniquingKeysWith: { $1 })
    }
}

extension Logger.MetadataValue {
    /// The same value as metadata; numbers and booleans stay numbers and booleans in the line.
    public init(_ value: JSONValue) {
        switch value {
        case .null: self = .string("null")
        case .bool(let b): self = .stringConvertible(b)
        case .int(let n): self = .stringConvertible(n)
        case .double(let d): self = .stringConvertible(d)
        case .string(let s): self = .string(s)
        case .array(let items): self = .array(items.map(Logger.MetadataValue.init))
        case .object(let entries): self = .dictionary(Dictionary(entries.map { ($0.0, Logger.MetadataValue($0.1)) }) { $1 })
        case .raw(let text): self = .string(text)
        }
    }
}
