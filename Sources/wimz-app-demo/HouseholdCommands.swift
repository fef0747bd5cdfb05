import ArgumentParser
import Foundation
import WimzRelayClient

/// `--invite`, `--members`, `--remove`: the household from the terminal, as the owner's phone
/// manages it. Each prints one JSON object and exits; a refusal is the relay's error and exit 2.
struct HouseholdCommands {
    let client: RelayClient

    /// Creates an invitation and prints it with its code (shown once).
    func invite(access: Access, label: String, control: Bool, until: Date?) async throws {
        let invite = try await client.invite(access: access, label: label, control: control, until: until)
        // A sealed household's link carries the robot's code, as this app verified it.
        var link: String?
        if await client.robotKeyTrust == .verified, let robot = await client.sealedRobotKeys, let code = invite.code {
            link = SealedInvitation(deviceID: client.configuration.deviceID, code: code, robotCode: robot.verificationCode).url.absoluteString
        }
        print(object([("invite_id", "\(invite.id)"), ("code", quoted(invite.code)), ("access", quoted(invite.access.rawValue)),
                      ("control", "\(invite.control)"), ("until", quoted(invite.until)),
                      ("expires_at", quoted(invite.expiresAt)), ("link", quoted(link))]))
    }

    /// Prints `{"members":[…]}` as the relay lists them.
    func members() async throws {
        let members = try await client.members().map { member in
            object([("token_id", "\(member.access.tokenID)"), ("label", quoted(member.label)),
                    ("access", quoted(member.access.access.rawValue)), ("control", "\(member.access.control)"),
                    ("until", quoted(member.access.until)), ("last_used_at", quoted(member.lastUsedAt)),
                    ("online", "\(member.online)")])
        }
        print(#"{"members":[\#(members.joined(separator: ","))]}"#)
    }

    /// Removes a member (its sockets close, its video is cut) and prints `{"removed":ID}`.
    func remove(_ tokenID: Int64) async throws {
        try await client.removeMember(tokenID)
        print(#"{"removed":\#(tokenID)}"#)
    }

    /// Runs whichever of the three was asked for; false when none was.
    static func run(_ demo: AppDemo, client: RelayClient) async throws -> Bool {
        let commands = HouseholdCommands(client: client)
        return try await exitingOnRefusal {
            if let level = demo.invite {
                guard let access = Access(rawValue: level), access != .owner else {
                    throw ValidationError("--invite takes family or guest")
                }
                let until = try demo.until.map { text in
                    guard let date = try? Date(text, strategy: .iso8601) else {
                        throw ValidationError("--until takes an ISO 8601 time with a zone, e.g. 2026-12-01T18:00:00Z")
                    }
                    return date
                }
                try await commands.invite(access: access, label: demo.label, control: demo.control, until: until)
            } else if demo.members {
                try await commands.members()
            } else if let remove = demo.remove {
                try await commands.remove(remove)
            } else {
                return false
            }
            return true
        }
    }

    private func object(_ members: [(String, String)]) -> String {
        "{" + members.map { "\(JSONValueText.quote($0.0)):\($0.1)" }.joined(separator: ",") + "}"
    }

    private func quoted(_ text: String?) -> String { text.map(JSONValueText.quote) ?? "null" }
    private func quoted(_ date: Date?) -> String { quoted(date?.formatted(.iso8601)) }
}

/// Runs a terminal command; a refusal of the relay is printed and ends the process with exit 2.
func exitingOnRefusal(_ body: () async throws -> Bool) async throws -> Bool {
    do {
        return try await body()
    } catch let error as RelayClientError {
        print("refused: \(error)")
        throw ExitCode(2)
    }
}
