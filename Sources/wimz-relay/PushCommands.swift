import ArgumentParser
import RelayCore
import RelayStore

/// `wimz-relay push list --device ID`: the phones registered for a device's pushes.
struct PushCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "push", abstract: "Push registrations (docs/protocol.md v1.2).", subcommands: [List.self])

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
}
