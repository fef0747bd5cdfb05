import ArgumentParser
import RelayCore
import RelayStore

extension Role: ExpressibleByArgument {}
extension Access: ExpressibleByArgument {}

struct Token: ParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Issue, list and revoke bearer tokens.",
        subcommands: [Issue.self, List.self, Revoke.self])

    struct Issue: ParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Issue a token. The secret is printed once, alone on the last line of stdout.")
        @OptionGroup var database: DatabaseOptions
        @Option(help: "Device id.") var device: String
        @Option(help: "robot or app.") var role: Role
        @Option(help: "Free-text label (e.g. whose phone).") var label: String = ""
        @Option(name: .customLong("expires-in"), help: "Lifetime in seconds (default: no expiry).")
        var expiresIn: Int64?
        @Option(help: "App tokens: the member's access level, owner, family or guest.")
        var access: Access = .owner
        @Flag(help: "App tokens: a guest may send commands and change things through the robot's API.")
        var control = false
        @Option(help: "App tokens: when the access ends (ISO 8601, e.g. 2026-12-01T18:00:00Z); required for guests.")
        var until: String?

        func validate() throws {
            if role == .robot, access != .owner || control || until != nil {
                throw ValidationError("--access, --control and --until are for app tokens")
            }
            if control, access != .guest { throw ValidationError("--control is a guest's grant (owners and family always have it)") }
            if access == .guest, until == nil, expiresIn == nil { throw ValidationError("a guest's access must end: give --until") }
            if until != nil, expiresIn != nil { throw ValidationError("give --expires-in or --until, not both") }
        }

        func run() throws {
            let deviceID = try parseDeviceID(device)
            let end = try until.map { text -> UnixTime in
                guard let time = UnixTime(iso8601: text), time > UnixTime.now() else {
                    throw CLIError("invalid --until '\(text.prefix(40))': an ISO 8601 time in the future, e.g. 2026-12-01T18:00:00Z")
                }
                return time
            }
            let db = try database.connect()
            let issued = try storeCall {
                try TokenRepository(db).issue(device: deviceID, role: role, label: label, expiresIn: expiresIn, until: end,
                                              rights: MemberRights(access: access, control: control), actor: "cli")
            }
            let expiry = issued.record.expiresAt?.iso8601 ?? "never"
            let level = role == .app ? ", \(access.rawValue)\(access == .guest ? control ? " with control" : " without control" : "")" : ""
            print("issued \(role.rawValue) token \(issued.record.id) for device \(deviceID)\(level) (expires: \(expiry))")
            print("the secret below is shown only once; only its SHA-256 digest is stored")
            print(issued.secret)
        }
    }

    struct List: ParsableCommand {
        static let configuration = CommandConfiguration(abstract: "List tokens (never their secrets).")
        @OptionGroup var database: DatabaseOptions
        @Option(help: "Only this device's tokens.") var device: String?

        func run() throws {
            let deviceID = try device.map(parseDeviceID)
            let db = try database.connect()
            let tokens = try storeCall { try TokenRepository(db).list(device: deviceID) }
            let now = UnixTime.now()
            printTable(["ID", "DEVICE", "ROLE", "ACCESS", "LABEL", "STATUS", "CREATED", "EXPIRES", "LAST_USED"], tokens.map { t in
                let status = t.revokedAt != nil ? "revoked" : t.isExpired(at: now) ? "expired" : "active"
                return [String(t.id), t.deviceID.rawValue, t.role.rawValue, t.role == .app ? accessText(t) : "-", t.label, status,
                        t.createdAt.iso8601, t.expiresAt?.iso8601 ?? "-", t.lastUsedAt?.iso8601 ?? "-"]
            })
        }
    }

    struct Revoke: ParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Revoke a token by id; its live sockets close within a second (4003).")
        @OptionGroup var database: DatabaseOptions
        @Argument(help: "Token id (from 'token list').") var tokenID: String

        func run() throws {
            guard let id = Int64(tokenID), id > 0 else { throw CLIError("invalid token id '\(tokenID.prefix(40))': expected a number from 'token list'") }
            let db = try database.connect()
            let result = try storeCall { try TokenRepository(db).revoke(id: id, actor: "cli") }
            print(result.changed ? "revoked token \(id)" : "token \(id) was already revoked")
        }
    }
}

/// `owner`, `family`, `guest` or `guest+control`, as the listings show it.
func accessText(_ token: TokenRecord) -> String {
    token.access == .guest && token.control ? "guest+control" : token.access.rawValue
}
