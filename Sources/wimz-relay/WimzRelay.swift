import ArgumentParser
import CProcessArguments
import RelayCore
import RelayServer

/// The entry point: the command line as the process got it (see `arguments`).
@main
enum Entry {
    static func main() { WimzRelay.main(Array(arguments.dropFirst())) }

    /// argv as glibc handed it over; Swift's `CommandLine.arguments` reads /proc/self/cmdline
    /// instead, which a chroot without /proc lacks (it is the fallback off glibc).
    static var arguments: [String] {
        let count = Int(CProcessArguments_count())
        guard count > 0, let vector = CProcessArguments_vector() else { return CommandLine.arguments }
        return (0..<count).map { vector[$0].map { String(cString: $0) } ?? "" }
    }
}

/// `wimz-relay`: the WIM-Z cloud relay daemon and its operator commands.
struct WimzRelay: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "wimz-relay",
        abstract: "WIM-Z cloud relay: pairs robots and apps over WebSocket and issues TURN credentials.",
        discussion: """
            Every command that touches the database takes --database-url or WIMZ_DATABASE_URL
            (a libpq conninfo string or postgresql:// URL). Run 'wimz-relay migrate' before 'serve'.
            """,
        version: RelayBuild.version,
        subcommands: [Serve.self, Migrate.self, Device.self, Token.self, PairingCodeCommand.self, PushCommand.self, TurnSecretCommand.self, ClusterCommand.self, ProtocolConstantsCommand.self, OptionsCommand.self],
        defaultSubcommand: nil)
}
