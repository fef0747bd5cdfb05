import ArgumentParser
import RelayCore
import RelayStore

/// `wimz-relay push list --device ID`: the phones registered for a device's pushes;
/// `wimz-relay push live-activities --device ID`: the Live Activity tokens its apps handed over.
struct PushCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "push", abstract: "Push registrations (docs/protocol.md v1.2).", subcommands: [List.self, LiveActivities.self])

    struct List: ParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "List a device's push registrations: token, environment, app token id, kinds.")
        @OptionGroup var database: DatabaseOptions
        @Option(help: "Device id.") var device: String

        func run() throws {
            let deviceID = try parseDeviceID(device)
            let db = try database.connect()
            let registrations = try storeCall { try PushRepository(db).registrations(device: deviceID) }
            print("TOKEN\tENVIRONMENT\tAPP_TOKEN\tEVENTS")
            for r in registrations {
                print("\(r.token)\t\(r.environment.rawValue)\t\(r.appTokenID)\t\(r.kinds.map(\.rawValue).sorted().joined(separator: ","))")
            }
        }
    }

    struct LiveActivities: ParsableCommand {
        static let configuration = CommandConfiguration(
            commandName: "live-activities",
            abstract: "List a device's Live Activity tokens (docs/protocol.md v1.4): kind, activity id, token, environment, app token id, since.")
        @OptionGroup var database: DatabaseOptions
        @Option(help: "Device id.") var device: String

        func run() throws {
            let deviceID = try parseDeviceID(device)
            let db = try database.connect()
            let registrations = try storeCall { try LiveActivityRepository(db).registrations(device: deviceID) }
            print("KIND\tACTIVITY\tTOKEN\tENVIRONMENT\tAPP_TOKEN\tCREATED")
            for r in registrations {
                let kind = r.activityID == nil ? "start_token" : "activity"
                print("\(kind)\t\(r.activityID?.rawValue ?? "-")\t\(r.token)\t\(r.environment.rawValue)\t\(r.appTokenID)\t\(r.createdAt?.iso8601 ?? "-")")
            }
        }
    }
}
