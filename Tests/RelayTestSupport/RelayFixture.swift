import Foundation
import RelayCore
import RelayStore

/// A migrated database with devices and tokens, and a running relay on it.
public final class RelayFixture: @unchecked Sendable {
    public let database: TestDatabase
    public let relay: RelayDaemon
    public var port: Int { relay.port }

    /// Tokens issued per device: robot and app.
    public private(set) var robotTokens: [String: String] = [:]
    public private(set) var appTokens: [String: String] = [:]
    public private(set) var tokenIDs: [String: Int64] = [:]

    public init(devices: [String] = ["dev1"], environment: [String: String] = [:], arguments: [String] = []) throws {
        database = try TestDatabase()
        let db = try database.connect()
        for device in devices {
            let id = DeviceID(device)!
            try DeviceRepository(db).add(id, name: "", actor: "test")
            let robot = try TokenRepository(db).issue(device: id, role: .robot, label: "", expiresIn: nil, actor: "test")
            let app = try TokenRepository(db).issue(device: id, role: .app, label: "", expiresIn: nil, actor: "test")
            robotTokens[device] = robot.secret
            appTokens[device] = app.secret
            tokenIDs[robot.secret] = robot.record.id
            tokenIDs[app.secret] = app.record.id
        }
        // A token's first read may wait 15 s for the store (2 s in production) before a 503: on a
        // loaded machine a read can take longer than 2 s, and a test of anything else must not
        // fail on it. Tests of the store going away start a RelayDaemon of their own.
        relay = try RelayDaemon(databaseURL: database.url, arguments: arguments,
                                environment: ["WIMZ_CREDENTIAL_HOLD": "15"].merging(environment) { _, given in given })
        try relay.waitUntilReady()
        guard relay.waitForLog(containing: "credentials_loaded") != nil else {
            throw TestSetupError("credentials never loaded")
        }
    }

    /// Issues another token.
    public func issue(device: String, role: Role, expiresIn: Int64? = nil) throws -> (secret: String, id: Int64) {
        let issued = try TokenRepository(try database.connect())
            .issue(device: DeviceID(device)!, role: role, label: "", expiresIn: expiresIn, actor: "test")
        return (issued.secret, issued.record.id)
    }

    public func robot(_ device: String = "dev1", useHeader: Bool = true) throws -> WebSocketTestClient {
        try WebSocketTestClient.connect(port: port, role: "robot", device: device, token: robotTokens[device], useHeader: useHeader)
    }

    /// An app socket, with its initial `device_status` (and replays) left unread.
    public func app(_ device: String = "dev1") throws -> WebSocketTestClient {
        try WebSocketTestClient.connect(port: port, role: "app", device: device, token: appTokens[device])
    }

    /// A robot and an app of `device`, their greetings read (the robot's TURN credential, the
    /// app's `device_status`, the robot's `app_presence`): the next frame either reads is news.
    public func robotAndApp(_ device: String = "dev1") throws -> (robot: WebSocketTestClient, app: WebSocketTestClient) {
        let robot = try self.robot(device)
        _ = try robot.receiveJSON()
        let app = try self.app(device)
        _ = try app.receiveJSON()
        _ = try robot.receiveJSON()
        return (robot, app)
    }

    /// Rows of the audit log, oldest first: (event, device, details JSON).
    public func auditEvents() throws -> [(event: String, device: String?, details: String)] {
        try database.connect().execute("SELECT event, device_id, details::text FROM audit_log ORDER BY id").rows
            .map { ($0[0] ?? "", $0[1], $0[2] ?? "") }
    }

    /// Waits until the audit log has an event satisfying `match`.
    public func waitForAudit(timeout: Double = 10, _ match: ((event: String, device: String?, details: String)) -> Bool) throws -> Bool {
        let deadline = Date().addingTimeInterval(timeout)
        while Date() < deadline {
            if try auditEvents().contains(where: match) { return true }
            usleep(100_000)
        }
        return false
    }

    deinit {
        relay.stop(signal: SIGKILL)
        database.drop()
    }
}
