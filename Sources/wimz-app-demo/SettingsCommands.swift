import ArgumentParser
import Foundation
import WimzRelayClient

/// `--settings` and `--set`: the robot's settings from the terminal (docs/protocol.md v1.6), as
/// the app's settings screen reads and writes them. Each prints one JSON object and exits; a
/// refusal is the relay's error and exit 2.
struct SettingsCommands {
    let client: RelayClient

    /// Prints `{"desired":{"version","doc","by"}|null,"reported":{"version","doc"}|null,"pending":BOOL}`.
    func show() async throws {
        let settings = try await client.settings()
        let desired = settings.desired.map { #"{"version":\#($0.version),"doc":\#($0.doc.text),"by":\#($0.by.map(String.init) ?? "null")}"# }
        let reported = settings.reported.map { #"{"version":\#($0.version),"doc":\#($0.doc.text)}"# }
        print(#"{"desired":\#(desired ?? "null"),"reported":\#(reported ?? "null"),"pending":\#(settings.isPending)}"#)
    }

    /// Merges `members` (a JSON object) into the desired document, written over the version read
    /// (read again and merged again when another phone wrote first); prints the written desired.
    func set(_ members: String) async throws {
        guard case .object(let changes) = try JSON(parsing: members) else { throw ValidationError("--set takes a JSON object") }
        let desired = try await client.updateSettings { current in
            guard case .object(var doc) = current else { return .object(changes) }
            doc.merge(changes) { _, new in new }
            return .object(doc)
        }
        print(#"{"version":\#(desired.version),"doc":\#(desired.doc.text)}"#)
    }

    /// Runs whichever was asked for; false when neither was.
    static func run(_ demo: AppDemo, client: RelayClient) async throws -> Bool {
        let commands = SettingsCommands(client: client)
        return try await exitingOnRefusal {
            if let members = demo.set {
                try await commands.set(members)
                return true
            }
            if demo.showSettings {
                try await commands.show()
                return true
            }
            return false
        }
    }
}
