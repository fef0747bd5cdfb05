import ArgumentParser
import RelayCore
import RelayStore

struct Device: ParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Manage devices (robots).",
        subcommands: [Add.self, List.self, Disable.self, Enable.self, Members.self, Timeline.self])

    struct Add: ParsableCommand {
        static let configuration = CommandConfiguration(abstract: "Register a device.")
        @OptionGroup var database: DatabaseOptions
        @Argument(help: "Device id: 1-64 characters from A-Z a-z 0-9 _ . -") var id: String
        @Option(help: "Human-readable name.") var name: String = ""

        func run() throws {
            let device = try parseDeviceID(id)
            let db = try database.connect()
            try storeCall { try DeviceRepository(db).add(device, name: name, actor: "cli") }
            print("added device \(device)")
        }
    }

    struct List: ParsableCommand {
        static let configuration = CommandConfiguration(abstract: "List devices.")
        @OptionGroup var database: DatabaseOptions

        func run() throws {
            let db = try database.connect()
            let devices = try storeCall { try DeviceRepository(db).list() }
            printTable(["DEVICE", "NAME", "STATUS", "CREATED"], devices.map {
                [$0.id.rawValue, $0.name, $0.isDisabled ? "disabled" : "enabled", $0.createdAt.iso8601]
            })
        }
    }

    struct Disable: ParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Disable a device: its tokens stop working and its live sockets close (4003).")
        @OptionGroup var database: DatabaseOptions
        @Argument var id: String

        func run() throws {
            let device = try parseDeviceID(id)
            let db = try database.connect()
            let result = try storeCall { try DeviceRepository(db).setDisabled(device, true, actor: "cli") }
            print(result.changed ? "disabled device \(device)" : "device \(device) was already disabled")
        }
    }

    struct Enable: ParsableCommand {
        static let configuration = CommandConfiguration(abstract: "Re-enable a disabled device.")
        @OptionGroup var database: DatabaseOptions
        @Argument var id: String

        func run() throws {
            let device = try parseDeviceID(id)
            let db = try database.connect()
            let result = try storeCall { try DeviceRepository(db).setDisabled(device, false, actor: "cli") }
            print(result.changed ? "enabled device \(device)" : "device \(device) was already enabled")
        }
    }

    struct Members: ParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "List a device's household: every app token neither revoked nor expired.")
        @OptionGroup var database: DatabaseOptions
        @Argument var id: String

        func run() throws {
            let device = try parseDeviceID(id)
            let db = try database.connect()
            let members = try storeCall { try HouseholdRepository(db).members(device: device) }
            printTable(["TOKEN_ID", "LABEL", "ACCESS", "UNTIL", "CREATED", "LAST_USED"], members.map {
                [String($0.id), $0.label, accessText($0), $0.until?.iso8601 ?? "-", $0.createdAt.iso8601, $0.lastUsedAt?.iso8601 ?? "-"]
            })
        }
    }

    struct Timeline: ParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Show a device's timeline as an operator sees it: its entries' count, bytes and times, its retention and last erase (never an entry's contents).")
        @OptionGroup var database: DatabaseOptions
        @Argument var id: String

        func run() throws {
            let device = try parseDeviceID(id)
            let db = try database.connect()
            let summary = try storeCall { try TimelineRepository(db).summary(device: device) }
            printTable(["ENTRIES", "BYTES", "OLDEST", "NEWEST", "DAYS", "ERASED"], [[
                String(summary.entries), String(summary.bytes), summary.oldest?.iso8601 ?? "-", summary.newest?.iso8601 ?? "-",
                summary.days.map(String.init) ?? "default", summary.erasedAt?.iso8601 ?? "-",
            ]])
        }
    }
}
