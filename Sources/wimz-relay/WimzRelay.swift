import ArgumentParser
import RelayCore

/// `wimz-relay`: the WIM-Z cloud relay daemon and its operator commands.
@main
struct WimzRelay: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "wimz-relay",
        abstract: "WIM-Z cloud relay: pairs robots and apps over WebSocket and issues TURN credentials.",
        discussion: """
            Every command that touches the database takes --database-url or WIMZ_DATABASE_URL
            (a libpq conninfo string or postgresql:// URL). Run 'wimz-relay migrate' before 'serve'.
            """,
        version: RelayVersion.current,
        subcommands: [Serve.self, Migrate.self, Device.self, Token.self, PairingCodeCommand.self, PushCommand.self, TurnSecretCommand.self, ClusterCommand.self, ProtocolConstantsCommand.self, OptionsCommand.self],
        defaultSubcommand: nil)
}
