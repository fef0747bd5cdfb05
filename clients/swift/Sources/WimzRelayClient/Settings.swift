import Foundation
import WimzProtocol
import WimzSealed
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

/// The robot's settings as the relay keeps them (docs/protocol.md v1.6, `GET …/settings`): what
/// the household asked for (``desired``, versioned) and what the robot last said it runs
/// (``reported``, with the desired version it applied). A setting written while the robot is
/// away waits at the relay; the robot gets it when it connects.
public struct RobotSettings: Sendable, Equatable {
    /// The household's document: its version, who wrote it (an app token's id) and when.
    public struct Desired: Sendable, Equatable {
        public var version: Int64
        public var doc: JSON
        public var by: Int64?
        public var at: Date?
        /// On a sealed device, why `doc` could not be opened (it is `null` then); nil when it
        /// opened, or was never sealed.
        public var sealedRejection: FrameRejection?

        init?(_ json: JSON?) {
            guard let json, let version = json["version"]?.int64Value, let doc = json["doc"], case .object = doc else { return nil }
            self.version = version
            self.doc = doc
            by = json["by"]?.int64Value
            at = json["at"]?.stringValue.flatMap(ISO8601.date)
        }
    }

    /// What the robot runs, which may differ from what was asked (a value it refused).
    public struct Reported: Sendable, Equatable {
        /// The desired version the robot applied.
        public var version: Int64
        public var doc: JSON
        public var at: Date?
        /// On a sealed device, why `doc` could not be opened (it is `null` then).
        public var sealedRejection: FrameRejection?

        init?(_ json: JSON?) {
            guard let json, let version = json["version"]?.int64Value, let doc = json["doc"], case .object = doc else { return nil }
            self.version = version
            self.doc = doc
            at = json["at"]?.stringValue.flatMap(ISO8601.date)
        }
    }

    public var desired: Desired?
    public var reported: Reported?

    public init(desired: Desired? = nil, reported: Reported? = nil) {
        self.desired = desired
        self.reported = reported
    }

    /// The version a write replaces (its `If-Match`): desired's, 0 when none was written.
    public var version: Int64 { desired?.version ?? 0 }
    /// Whether the robot has yet to apply what the household asked for.
    public var isPending: Bool { version > (reported?.version ?? 0) }
}

/// How a write of the desired settings ended.
public enum SettingsWrite: Sendable, Equatable {
    /// Stored as the new desired document (the robot gets it now, or when it connects).
    case written(RobotSettings.Desired)
    /// Someone wrote first: the desired document as it is now (nil: none), to merge the change
    /// into and write again with its version (last-write-wins is never silent).
    case conflict(current: RobotSettings.Desired?)
}

extension RelayClient {
    /// The robot's settings, desired and reported (any member).
    /// On a sealed device both documents come opened (the desired one sealed by a member of the
    /// household, the reported one by the robot), each checked against the version it was sealed
    /// for; one that does not open has a `null` doc and says why (`sealedRejection`).
    public func settings() async throws -> RobotSettings {
        let body = try await deviceCall("GET", .settings)
        return await opened(RobotSettings(desired: RobotSettings.Desired(body["desired"]), reported: RobotSettings.Reported(body["reported"])))
    }

    /// Writes the desired settings `doc` (a JSON object of at most 16 KiB) over version
    /// `replacing` (``RobotSettings/version``, 0 for none) — owners, family and guests with
    /// control. A stale version is ``SettingsWrite/conflict(current:)``, not an error. On a sealed
    /// device the document goes sealed (kind `settings`, its version inside), as the robot opens it.
    /// - Throws: ``RelayClientError/forbidden(code:message:)`` for a guest without control,
    ///   ``RelayClientError/http(status:code:message:)`` with `too_large`, `invalid_settings` or
    ///   `sealed_device` (a sealed device's documents are sealed frames).
    public func writeSettings(_ doc: JSON, replacing version: Int64) async throws -> SettingsWrite {
        var request = URLRequest(url: relayURL(httpBase, WimzProtocol.Path.device(configuration.deviceID, .settings)))
        request.httpMethod = "PUT"
        request.httpBody = Data(try sealedSettings(doc, version: version + 1).utf8)
        request.setValue("\"\(version)\"", forHTTPHeaderField: "If-Match")
        request.setValue("Bearer \(currentToken)", forHTTPHeaderField: "Authorization")
        request.setValue("application/json", forHTTPHeaderField: "Content-Type")
        // Sent once: a write changes state (a second one would be a conflict with the first).
        let (data, response) = try await exchange(request, session: configuration.urlSession)
        let status = (response as? HTTPURLResponse)?.statusCode ?? 0
        let body = (try? JSON(parsing: String(decoding: data, as: UTF8.self))) ?? .null
        switch status {
        case 200:
            guard let desired = RobotSettings.Desired(body) else { throw RelayClientError.invalidResponse("settings: \(body.text.prefix(200))") }
            return .written(await opened(RobotSettings(desired: desired)).desired ?? desired)
        case ErrorCode.versionConflict.httpStatus where body["error"]?.stringValue == ErrorCode.versionConflict.rawValue:
            return .conflict(current: await opened(RobotSettings(desired: RobotSettings.Desired(body["desired"]))).desired)
        default:
            throw RelayClientError.refusal(status: status, body: data)
        }
    }

    /// Reads, changes and writes the desired settings, reading again and re-applying `change` on
    /// a conflict (up to `attempts` writes): `change` gets the current document (`{}` for none)
    /// and returns the one to write.
    public func updateSettings(attempts: Int = 3, _ change: @Sendable (JSON) throws -> JSON) async throws -> RobotSettings.Desired {
        var current = try await settings().desired
        for _ in 0..<max(1, attempts) {
            switch try await writeSettings(try change(current?.doc ?? .object([:])), replacing: current?.version ?? 0) {
            case .written(let desired): return desired
            case .conflict(let now): current = now
            }
        }
        throw RelayClientError.http(status: ErrorCode.versionConflict.httpStatus, code: ErrorCode.versionConflict.rawValue,
                                    message: "the settings kept changing: \(attempts) writes were overtaken")
    }
}
