import RelayCore

/// Devices in the store. Every change is written with its audit event in one transaction.
public struct DeviceRepository {
    let db: PGConnection

    public init(_ db: PGConnection) { self.db = db }

    static let columns: PGQuery = "id, name, created_at, disabled_at"

    /// Creates a device; a duplicate id is a `.conflict` error.
    @discardableResult
    public func add(_ id: DeviceID, name: String, actor: String) throws -> DeviceRecord {
        try db.transaction {
            let rows: PGRows
            do {
                rows = try db.execute("INSERT INTO devices (id, name) VALUES (\(id), \(name)) RETURNING \(DeviceRepository.columns)")
            } catch let error as StoreError where error.isUniqueViolation {
                throw StoreError(.conflict, "device \(id) already exists")
            }
            let device = try DeviceRepository.decode(rows.single())
            try AuditRepository(db).append([
                AuditRepository.event(.deviceCreated, at: db.clock.wall(), actor: actor, deviceID: id.rawValue,
                                      details: .object([("name", .string(name))])),
            ])
            return device
        }
    }

    public func list() throws -> [DeviceRecord] {
        try db.execute("SELECT \(DeviceRepository.columns) FROM devices ORDER BY id").records.map(DeviceRepository.decode)
    }

    public func get(_ id: DeviceID) throws -> DeviceRecord? {
        try db.execute("SELECT \(DeviceRepository.columns) FROM devices WHERE id = \(id)")
            .firstRecord.map(DeviceRepository.decode)
    }

    /// How a transaction holds a device's row until it ends.
    public enum Lock {
        /// Against a concurrent disable (what is issued for the device is issued for an enabled one).
        case share
        /// Changes to the device's household go one at a time.
        case update

        var clause: PGQuery {
            switch self {
            case .share: "FOR SHARE"
            case .update: "FOR UPDATE"
            }
        }
    }

    /// `id`'s row, locked in the caller's transaction; nil if there is no such device.
    public func lock(_ id: DeviceID, _ lock: Lock) throws -> DeviceRecord? {
        try db.execute("SELECT \(DeviceRepository.columns) FROM devices WHERE id = \(id) \(lock.clause)")
            .firstRecord.map(DeviceRepository.decode)
    }

    /// Disables or re-enables a device. Disabling stops every token of the device; running
    /// daemons hear of it through the `wimz_credentials` notification and close its sockets.
    /// Returns the device and whether anything changed (a no-op is not audited).
    @discardableResult
    public func setDisabled(_ id: DeviceID, _ disabled: Bool, actor: String) throws -> (device: DeviceRecord, changed: Bool) {
        try db.transaction {
            guard let current = try lock(id, .update) else { throw StoreError(.notFound, "unknown device \(id)") }
            guard current.isDisabled != disabled else { return (current, false) }
            let updated = try db.execute(
                """
                UPDATE devices SET disabled_at = CASE WHEN \(disabled)::boolean THEN now() ELSE NULL END
                WHERE id = \(id) RETURNING \(DeviceRepository.columns)
                """)
            // A disabled device's timeline goes with it (v1.6); its numbers go on if it comes back.
            if disabled { try TimelineRepository(db).eraseWithin(device: id) }
            try AuditRepository(db).append([
                AuditRepository.event(disabled ? .deviceDisabled : .deviceEnabled, at: db.clock.wall(),
                                      actor: actor, deviceID: id.rawValue),
            ])
            return (try DeviceRepository.decode(updated.single()), true)
        }
    }

    static func decode(_ row: PGRow) throws -> DeviceRecord {
        DeviceRecord(id: try row.deviceID("id"), name: try row.string("name"), createdAt: try row.time("created_at"),
                     disabledAt: try row.optionalTime("disabled_at"))
    }
}
