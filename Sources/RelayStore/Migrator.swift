import RelayCore
import RelayCrypto

#if canImport(Glibc)
import Glibc
#endif

/// One numbered SQL file from `migrations/` (`0001_initial.sql` → version 1, name `initial`).
public struct Migration: Sendable, Equatable {
    public var version: Int
    public var name: String
    public var sql: String

    /// SHA-256 of the file's bytes, hex. Editing an applied file is detected through it.
    public var checksum: String { Hex.encode(Crypto.sha256(sql)) }

    public init(version: Int, name: String, sql: String) {
        self.version = version
        self.name = name
        self.sql = sql
    }

    /// Reads every `NNNN_name.sql` in `directory`, sorted by version.
    public static func load(from directory: String) throws -> [Migration] {
        guard let dir = opendir(directory) else {
            throw StoreError(.schema, "migrations directory not found: \(directory)")
        }
        defer { closedir(dir) }
        var found: [Migration] = []
        while let entry = readdir(dir) {
            let fileName = withUnsafeBytes(of: entry.pointee.d_name) { raw in
                String(cString: raw.bindMemory(to: CChar.self).baseAddress!)
            }
            guard fileName.hasSuffix(".sql") else { continue }
            let stem = fileName.dropLast(4)
            guard let underscore = stem.firstIndex(of: "_"), let version = Int(stem[..<underscore]) else {
                throw StoreError(.schema, "migration file name must be NNNN_name.sql: \(fileName)")
            }
            let sql = try readFile(directory + "/" + fileName)
            found.append(Migration(version: version, name: String(stem[stem.index(after: underscore)...]), sql: sql))
        }
        found.sort { $0.version < $1.version }
        for (a, b) in zip(found, found.dropFirst()) where a.version == b.version {
            throw StoreError(.schema, "two migrations with version \(a.version): \(a.name), \(b.name)")
        }
        return found
    }

    private static func readFile(_ path: String) throws -> String {
        guard let bytes = FileContents.read(path) else { throw StoreError(.schema, "cannot read \(path)") }
        return String(decoding: bytes, as: UTF8.self)
    }
}

/// Where the schema stands relative to the migrations this binary knows.
public struct SchemaStatus: Sendable, Equatable {
    public var applied: [Int]
    public var pending: [Int]
    /// Applied versions this binary has no file for (the database is newer than the binary).
    public var unknown: [Int]

    public var isCurrent: Bool { pending.isEmpty }
}

/// The oldest release that may serve the schema, as its migrations recorded it (`release_floor`).
public struct ReleaseFloor: Sendable, Equatable {
    public var oldestRelease: ReleaseVersion
    /// The migration that set it, and why an older release must not serve the schema.
    public var migration: Int
    public var reason: String

    /// What `release` must be told when it may not serve the schema; nil when it may.
    public func refusal(for release: ReleaseVersion) -> String? {
        guard release < oldestRelease else { return nil }
        return "this is wimz-relay \(release), but the database's schema needs \(oldestRelease) or newer "
            + "(migration \(migration), \(reason)). Install \(oldestRelease) or newer again, or restore the "
            + "backup taken before the upgrade into a fresh database and point this release at it "
            + "(docs/operations.md \"Roll back\")"
    }
}

/// Applies pending migrations in order, each in its own transaction, under an advisory lock
/// so concurrent runners (two nodes' `ExecStartPre`) serialise instead of racing.
public struct Migrator: Sendable {
    /// Arbitrary constant naming the lock; shared by every wimz-relay process.
    static let advisoryLockKey: Int64 = 0x77_69_6D_7A_6D_69_67  // "wimzmig"

    public let migrations: [Migration]

    public init(migrations: [Migration]) { self.migrations = migrations }

    /// Applies what is pending; returns the versions applied by this call.
    /// Throws if an applied file's checksum differs from the file on disk.
    @discardableResult
    public func migrate(_ db: PGConnection) throws -> [Migration] {
        try db.execute("SELECT pg_advisory_lock(\(Migrator.advisoryLockKey))")
        defer { _ = try? db.execute("SELECT pg_advisory_unlock(\(Migrator.advisoryLockKey))") }
        try db.execute("""
            CREATE TABLE IF NOT EXISTS schema_migrations (
                version    integer PRIMARY KEY,
                name       text NOT NULL,
                checksum   text NOT NULL,
                applied_at timestamptz NOT NULL DEFAULT now()
            )
            """)
        let applied = try appliedChecksums(db)
        try verifyChecksums(applied)
        var done: [Migration] = []
        for migration in migrations where applied[migration.version] == nil {
            try db.transaction {
                try db.executeScript(migration.sql)
                try db.execute(
                    "INSERT INTO schema_migrations (version, name, checksum) VALUES (\(migration.version), \(migration.name), \(migration.checksum))")
            }
            done.append(migration)
        }
        return done
    }

    /// Reads the applied set without changing anything (for `/readyz`).
    public func status(_ db: PGConnection) throws -> SchemaStatus {
        let exists = try db.execute("SELECT to_regclass('schema_migrations') IS NOT NULL AS present").single().bool("present")
        let applied = exists ? try appliedChecksums(db) : [:]
        try verifyChecksums(applied)
        let known = Set(migrations.map(\.version))
        return SchemaStatus(
            applied: applied.keys.sorted(),
            pending: migrations.map(\.version).filter { applied[$0] == nil },
            unknown: applied.keys.filter { !known.contains($0) }.sorted())
    }

    /// The schema's release floor; nil before migration 0012 made one.
    public func releaseFloor(_ db: PGConnection) throws -> ReleaseFloor? {
        guard try db.execute("SELECT to_regclass('release_floor') IS NOT NULL AS present").single().bool("present"),
              let row = try db.execute("SELECT oldest_release, migration, reason FROM release_floor").firstRecord
        else { return nil }
        let text = try row.optionalString("oldest_release")
        guard let release = text.flatMap({ ReleaseVersion($0) }), let migration = try row.optionalInt64("migration") else {
            throw StoreError(.schema, "release_floor holds \(text ?? "null") / \(try row.optionalString("migration") ?? "null"), "
                + "not a release and a migration")
        }
        return ReleaseFloor(oldestRelease: release, migration: Int(migration), reason: try row.optionalString("reason") ?? "")
    }

    private func appliedChecksums(_ db: PGConnection) throws -> [Int: String] {
        var out: [Int: String] = [:]
        for row in try db.execute("SELECT version, checksum FROM schema_migrations").records {
            out[try row.int("version")] = try row.string("checksum")
        }
        return out
    }

    private func verifyChecksums(_ applied: [Int: String]) throws {
        for migration in migrations {
            if let sum = applied[migration.version], sum != migration.checksum {
                throw StoreError(.schema, "migration \(migration.version)_\(migration.name).sql was changed after "
                    + "it was applied (checksum \(migration.checksum.prefix(12)) ≠ applied \(sum.prefix(12)))")
            }
        }
    }
}
