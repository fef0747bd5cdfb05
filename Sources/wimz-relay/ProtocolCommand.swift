import ArgumentParser
import WimzProtocol

/// `wimz-relay protocol-constants`: what every client must agree on (close codes and their
/// reconnect meaning, paths, message types, replayed events, limits) as JSON, so clients in
/// other languages check their constants against the relay's (the robot library's tests do).
struct ProtocolConstantsCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "protocol-constants",
        abstract: "Print the protocol's constants (close codes, paths, names, limits) as JSON.")

    func run() { print(WimzProtocol.constantsJSON) }
}
