import RelayCore

/// One side of a device's settings (docs/protocol.md "The robot's settings", v1.6): its version,
/// the document's JSON text as it was sent, and when it was written; `by`, for the desired side,
/// the app token that wrote it.
public struct SettingsDocument: Sendable, Equatable {
    public var version: Int64
    public var doc: String
    public var at: UnixTime
    public var by: Int64?

    public init(version: Int64, doc: String, at: UnixTime, by: Int64? = nil) {
        (self.version, self.doc, self.at, self.by) = (version, doc, at, by)
    }
}

/// What the household asked for and what the robot last said it runs.
public struct DeviceSettings: Sendable, Equatable {
    public var desired: SettingsDocument?
    public var reported: SettingsDocument?

    public init(desired: SettingsDocument? = nil, reported: SettingsDocument? = nil) {
        (self.desired, self.reported) = (desired, reported)
    }

    public var versions: SettingsVersions { SettingsVersions(desired: desired?.version ?? 0, reported: reported?.version) }
}

/// The settings documents of each device (migrations/0017). Every write notifies every node.
public struct SettingsRepository {
    let db: PGConnection

    public init(_ db: PGConnection) { self.db = db }

    /// The outcome of a write of the desired document.
    public enum Written: Sendable, Equatable {
        case stored(SettingsDocument)
        /// The version read was not the current one: the current desired document (nil: none).
        case stale(current: SettingsDocument?)
    }

    public func settings(of device: DeviceID) throws -> DeviceSettings {
        guard let row = try db.execute(
            """
            SELECT desired_version, desired_doc, desired_by, desired_at, reported_version, reported_doc, reported_at
            FROM device_settings WHERE device_id = \(device)
            """).firstRecord else { return DeviceSettings() }
        return try Self.decode(row)
    }

    /// Writes the desired document `doc` (JSON text, checked by the caller) as version
    /// `read + 1`, if `read` is the current version (0: none yet), under the device's row lock;
    /// audited `settings_changed` with who wrote it. A plain document for a sealed device is
    /// refused (409 `sealed_device`): its robot opens only sealed ones.
    public func writeDesired(device: DeviceID, read: Int64, doc: String, sealedFrame: Bool, by token: Int64,
                             address: String?) throws -> Written {
        try db.transaction {
            guard let record = try DeviceRepository(db).lock(device, .update) else { throw RelayError(.notFound, "unknown device \(device)") }
            if record.isDisabled { throw RelayError(.deviceDisabled, "device \(device) is disabled") }
            if !sealedFrame, try SealedRepository(db).currentEpoch(device: device) != nil {
                throw RelayError(.sealedDevice, "this device is sealed: its settings are a sealed frame of kind settings")
            }
            let current = try settings(of: device).desired
            guard (current?.version ?? 0) == read else { return .stale(current: current) }
            let now = db.clock.wall()
            try db.execute(
                """
                INSERT INTO device_settings (device_id, desired_version, desired_doc, desired_by, desired_at)
                VALUES (\(device), \(read + 1)::bigint, \(doc), \(token)::bigint, \(now)::timestamptz)
                ON CONFLICT (device_id) DO UPDATE SET desired_version = EXCLUDED.desired_version, desired_doc = EXCLUDED.desired_doc,
                    desired_by = EXCLUDED.desired_by, desired_at = EXCLUDED.desired_at
                """)
            try AuditRepository(db).append([
                AuditRepository.event(.settingsChanged, at: now, actor: "app", deviceID: device.rawValue, tokenID: token,
                                      remoteAddress: address,
                                      details: .object([("version", .int(read + 1)), ("bytes", .int(Int64(doc.utf8.count)))])),
            ])
            return .stored(SettingsDocument(version: read + 1, doc: doc, at: now, by: token))
        }
    }

    /// Stores what the robot says it runs after applying desired version `version`, unless that
    /// is above the desired version (0 when none was written: a version never asked for is
    /// ignored; version 0 is the robot's own defaults). Returns whether it was stored.
    @discardableResult
    public func report(device: DeviceID, version: Int64, doc: String) throws -> Bool {
        let now = db.clock.wall()
        return try !db.execute(
            """
            INSERT INTO device_settings (device_id, reported_version, reported_doc, reported_at)
            SELECT d.id, \(version)::bigint, \(doc), \(now)::timestamptz FROM devices d
            WHERE d.id = \(device) AND (\(version)::bigint = 0 OR EXISTS (SELECT 1 FROM device_settings s WHERE s.device_id = d.id))
            ON CONFLICT (device_id) DO UPDATE SET reported_version = EXCLUDED.reported_version, reported_doc = EXCLUDED.reported_doc,
                reported_at = EXCLUDED.reported_at
                WHERE device_settings.desired_version >= EXCLUDED.reported_version
            RETURNING 1 AS stored
            """).records.isEmpty
    }

    static func decode(_ row: PGRow) throws -> DeviceSettings {
        let desiredVersion = try row.int64("desired_version")
        var settings = DeviceSettings()
        if desiredVersion > 0, let doc = try row.optionalString("desired_doc") {
            settings.desired = SettingsDocument(version: desiredVersion, doc: doc, at: try row.time("desired_at"),
                                                by: try row.optionalInt64("desired_by"))
        }
        if let version = try row.optionalInt64("reported_version"), let doc = try row.optionalString("reported_doc") {
            settings.reported = SettingsDocument(version: version, doc: doc, at: try row.time("reported_at"))
        }
        return settings
    }
}
