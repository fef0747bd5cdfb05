import CLibPQ
import RelayCore
import RelayCrypto

#if canImport(Glibc)
import Glibc
#endif

/// A failure talking to PostgreSQL, with libpq's message and the SQLSTATE when there is one.
public struct StoreError: Error, CustomStringConvertible, Sendable {
    public enum Kind: Sendable {
        /// Could not connect, or the connection broke.
        case unavailable
        /// The server rejected a statement.
        case query
        /// What the caller named does not exist (a device, a token, a secret).
        case notFound
        /// Something the caller asked for does not hold (a duplicate, a disabled device, …).
        case conflict
        /// Schema/migration problem.
        case schema
    }

    public var kind: Kind
    public var message: String
    public var sqlState: String?

    public init(_ kind: Kind, _ message: String, sqlState: String? = nil) {
        self.kind = kind
        self.message = message
        self.sqlState = sqlState
    }

    public var description: String { message }

    /// `23505`: a unique constraint was violated.
    public var isUniqueViolation: Bool { sqlState == "23505" }

    /// The server refused the statement's data for good, not for a passing reason: a data
    /// exception (class 22: a value its type does not take, a NUL in text, …) or an integrity
    /// constraint (class 23) other than a unique key, which a replay of a stored row can meet.
    public var refusesData: Bool {
        guard kind == .query, let sqlState else { return false }
        return sqlState.hasPrefix("22") || (sqlState.hasPrefix("23") && !isUniqueViolation)
    }
}

/// Rows of one statement's result, in text format.
public struct PGRows: Sendable {
    public var columns: [String]
    public var rows: [[String?]]
    /// Rows touched by INSERT/UPDATE/DELETE.
    public var affected: Int

    public var first: [String?]? { rows.first }
}

/// A notification received on a `LISTEN`ed channel.
public struct PGNotification: Sendable, Equatable {
    public var channel: String
    public var payload: String

    public init(channel: String, payload: String) {
        self.channel = channel
        self.payload = payload
    }
}

/// One libpq connection. Owns its `PGconn` and frees it in `deinit`.
/// Not thread-safe: use it from one thread at a time.
public final class PGConnection {
    private var conn: OpaquePointer?
    /// The time the repositories read on this connection (their audit events' stamps, a token's
    /// check, a member's `until`): the relay's clock (a test's manual one), the system's by default.
    public let clock: RelayClock

    /// Connects with a libpq conninfo string or `postgresql://` URL. `connectTimeout` bounds the
    /// attempt unless the conninfo sets its own; `applicationName` (what `pg_stat_activity` shows)
    /// replaces the conninfo's. `clock` is the repositories' time on it.
    public init(conninfo: String, connectTimeout: Int = 5, applicationName: String? = nil, clock: RelayClock = .system) throws {
        self.clock = clock
        // Keywords before the expanded conninfo yield to it, those after it win. With several
        // hosts libpq then skips a standby (a conninfo may still say otherwise: see below).
        var keywords = ["connect_timeout", "target_session_attrs", "dbname"]
        var values = [String(connectTimeout), "read-write", conninfo]
        if let applicationName {
            keywords.append("application_name")
            values.append(applicationName)
        }
        conn = PGConnection.connect(keywords, values)
        guard let conn, PQstatus(conn) == CONNECTION_OK else {
            let message = conn.map { PGConnection.errorMessage($0) } ?? "out of memory"
            if let conn { PQfinish(conn) }
            self.conn = nil
            throw StoreError(.unavailable, "database unreachable: \(message)")
        }
        // Times cross the wire as UTC ISO 8601 so UnixTime can parse them without zone tables.
        let recovery = try execute("SET TIME ZONE 'UTC'; SET client_min_messages = warning; SELECT pg_is_in_recovery()")
        // Every connection of the relay writes: a standby (a conninfo that asked for any server,
        // or a primary demoted meanwhile) is no place for it; the caller tries again.
        if recovery.first?.first == "t" {
            close()
            throw StoreError(.unavailable, "database server is in recovery (a standby), not the primary")
        }
    }

    deinit {
        if let conn { PQfinish(conn) }
    }

    private static func connect(_ keywords: [String], _ values: [String]) -> OpaquePointer? {
        var keywordPointers = keywords.map { strdup($0) } + [nil]
        var valuePointers = values.map { strdup($0) } + [nil]
        defer { (keywordPointers + valuePointers).forEach { free($0) } }
        return keywordPointers.withUnsafeMutableBufferPointer { k in
            valuePointers.withUnsafeMutableBufferPointer { v in
                k.baseAddress!.withMemoryRebound(to: UnsafePointer<CChar>?.self, capacity: k.count) { kp in
                    v.baseAddress!.withMemoryRebound(to: UnsafePointer<CChar>?.self, capacity: v.count) { vp in
                        PQconnectdbParams(kp, vp, 1)
                    }
                }
            }
        }
    }

    /// True while the connection is usable.
    public var isOpen: Bool {
        guard let conn else { return false }
        return PQstatus(conn) == CONNECTION_OK
    }

    /// Closes the connection now (`isOpen` is false from then on).
    public func close() {
        if let conn { PQfinish(conn) }
        conn = nil
    }

    /// Reads what the server sent while the connection was idle: throws `.unavailable` (and the
    /// connection is closed) when the server has gone — shut down, killed, failed over — so the
    /// next statement is not the one to find out.
    public func verifyOpen() throws {
        guard let conn else { throw StoreError(.unavailable, "connection closed") }
        // Twice: a read that found the server's farewell (its FATAL message) stops there; the
        // end of the stream behind it is seen by the next one.
        guard PQconsumeInput(conn) == 1, PQconsumeInput(conn) == 1, PQstatus(conn) == CONNECTION_OK else {
            let message = PGConnection.errorMessage(conn)
            close()
            throw StoreError(.unavailable, "database connection lost: \(message)")
        }
    }

    /// The socket, for waiting on notifications with poll(2).
    public var socket: Int32 { conn.map { PQsocket($0) } ?? -1 }

    /// Runs one statement, its values bound (``PGQuery``). One without values may hold several
    /// statements separated by `;`.
    @discardableResult
    public func execute(_ query: PGQuery) throws -> PGRows {
        guard let conn else { throw StoreError(.unavailable, "connection closed") }
        let sql = query.sql
        if query.parameters.isEmpty { return try consume(PQexec(conn, sql)) }
        return try consume(withParameters(query.parameters) {
            PQexecParams(conn, sql, Int32(query.parameters.count), nil, $0, $1, $2, 0)
        })
    }

    /// Like `execute`, for a statement this connection runs again and again (the writers'
    /// batches, the token lookups): it is parsed and analysed once, on first use, and from then
    /// on only bound and run. PostgreSQL re-plans it by itself after a schema change.
    @discardableResult
    public func executePrepared(_ query: PGQuery) throws -> PGRows {
        guard let conn else { throw StoreError(.unavailable, "connection closed") }
        let sql = query.sql, name: String
        if let known = preparedNames[sql] {
            name = known
        } else {
            name = "wimz_\(preparedNames.count)"
            _ = try consume(PQprepare(conn, name, sql, Int32(query.parameters.count), nil))
            preparedNames[sql] = name
        }
        return try consume(withParameters(query.parameters) { PQexecPrepared(conn, name, Int32(query.parameters.count), $0, $1, $2, 0) })
    }

    /// Statements prepared on this connection (a session's objects: a rollback keeps them).
    private var preparedNames: [String: String] = [:]

    /// `parameters` as libpq reads them (values, their lengths, their formats: 0 text, 1
    /// binary), for the duration of `body`. Text goes as C strings, whose length libpq finds.
    private func withParameters(_ parameters: [PGParameter],
                                _ body: (UnsafePointer<UnsafePointer<CChar>?>?, UnsafePointer<Int32>?,
                                         UnsafePointer<Int32>?) -> OpaquePointer?) -> OpaquePointer? {
        if parameters.isEmpty { return body(nil, nil, nil) }
        var values: [UnsafeMutablePointer<CChar>?] = []
        var lengths: [Int32] = []
        var formats: [Int32] = []
        for parameter in parameters {
            switch parameter.value {
            case .null:
                values.append(nil)
                lengths.append(0)
                formats.append(0)
            case .text(let text):
                values.append(strdup(text))
                lengths.append(0)
                formats.append(0)
            case .binary(let bytes):
                let copy = malloc(max(bytes.count, 1))!
                bytes.withUnsafeBytes { if let base = $0.baseAddress { memcpy(copy, base, bytes.count) } }
                values.append(copy.assumingMemoryBound(to: CChar.self))
                lengths.append(Int32(bytes.count))
                formats.append(1)
            }
        }
        defer { values.forEach { free($0) } }
        return values.withUnsafeBufferPointer { buffer in
            buffer.baseAddress!.withMemoryRebound(to: UnsafePointer<CChar>?.self, capacity: buffer.count) { values in
                lengths.withUnsafeBufferPointer { lengths in
                    formats.withUnsafeBufferPointer { formats in body(values, lengths.baseAddress, formats.baseAddress) }
                }
            }
        }
    }

    /// Runs several `;`-separated statements as one simple query (migration files).
    public func executeScript(_ sql: String) throws {
        guard let conn else { throw StoreError(.unavailable, "connection closed") }
        _ = try consume(PQexec(conn, sql))
    }

    /// Runs `body` inside BEGIN … COMMIT, rolling back if it throws.
    public func transaction<T>(_ body: () throws -> T) throws -> T {
        try execute("BEGIN")
        do {
            let value = try body()
            try execute("COMMIT")
            return value
        } catch {
            if isOpen { _ = try? execute("ROLLBACK") }
            throw error
        }
    }

    /// Reads what arrived on the socket and returns the pending notifications.
    public func drainNotifications() throws -> [PGNotification] {
        guard let conn else { throw StoreError(.unavailable, "connection closed") }
        guard PQconsumeInput(conn) == 1 else {
            throw StoreError(.unavailable, "database connection lost: \(PGConnection.errorMessage(conn))")
        }
        var out: [PGNotification] = []
        while let note = PQnotifies(conn) {
            out.append(PGNotification(channel: String(cString: note.pointee.relname),
                                      payload: String(cString: note.pointee.extra)))
            PQfreemem(note)
        }
        return out
    }

    private func consume(_ result: OpaquePointer?) throws -> PGRows {
        guard let conn else { throw StoreError(.unavailable, "connection closed") }
        guard let result else {
            throw StoreError(.unavailable, "database connection lost: \(PGConnection.errorMessage(conn))")
        }
        defer { PQclear(result) }
        switch PQresultStatus(result) {
        case PGRES_COMMAND_OK, PGRES_EMPTY_QUERY:
            return PGRows(columns: [], rows: [], affected: Int(String(cString: PQcmdTuples(result))) ?? 0)
        case PGRES_TUPLES_OK:
            let nfields = PQnfields(result)
            let ntuples = PQntuples(result)
            let columns = (0..<nfields).map { String(cString: PQfname(result, $0)) }
            var rows: [[String?]] = []
            rows.reserveCapacity(Int(ntuples))
            for r in 0..<ntuples {
                rows.append((0..<nfields).map { c in
                    PQgetisnull(result, r, c) == 1 ? nil : String(cString: PQgetvalue(result, r, c))
                })
            }
            return PGRows(columns: columns, rows: rows, affected: Int(ntuples))
        default:
            let state = PQresultErrorField(result, Int32(UInt8(ascii: "C"))).map { String(cString: $0) }
            let primary = PQresultErrorField(result, Int32(UInt8(ascii: "M"))).map { String(cString: $0) }
            let message = primary ?? PGConnection.errorMessage(conn)
            if state == PGConnection.readOnlyTransaction || state?.hasPrefix("57P") == true {
                // A primary demoted under us (25006: writes refused) or a server shutting down
                // (57P01–57P04): this connection has no future; drop it so the caller reconnects,
                // and libpq finds the primary.
                close()
                throw StoreError(.unavailable, "database connection dropped: \(message)", sqlState: state)
            }
            let kind: StoreError.Kind = PQstatus(conn) == CONNECTION_OK ? .query : .unavailable
            throw StoreError(kind, message, sqlState: state)
        }
    }

    /// SQLSTATE `read_only_sql_transaction`: a write on a server that is (now) a standby.
    static let readOnlyTransaction = "25006"

    /// libpq's last error, folded onto one line (it spreads hints over several).
    private static func errorMessage(_ conn: OpaquePointer) -> String {
        String(cString: PQerrorMessage(conn)).split(whereSeparator: { $0 == "\n" || $0 == "\t" })
            .map { $0.trimmingTrailingNewlines() }.filter { !$0.isEmpty }.joined(separator: "; ")
    }
}

extension StringProtocol {
    func trimmingTrailingNewlines() -> String {
        var s = Substring(self)
        while let last = s.last, last == "\n" || last == "\r" || last == " " { s = s.dropLast() }
        return String(s)
    }
}

/// bytea's text forms: what a value binds as (``PGQuery``) and what a row reads (``PGRow``).
enum PGValue {
    /// `\x…` hex form of bytea.
    static func byteaText(_ bytes: [UInt8]) -> String { "\\x" + Hex.encode(bytes) }

    static func bytes(fromBytea text: String?) -> [UInt8]? {
        guard let text, text.hasPrefix("\\x") else { return nil }
        return Hex.decode(String(text.dropFirst(2)))
    }
}
