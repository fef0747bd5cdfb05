import ArgumentParser
import RelayCore
import RelayStore

/// `wimz-relay turn-secret add|list|rotate|retire`: secrets in coturn's `turn_secret` table.
struct TurnSecretCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "turn-secret",
        abstract: "Manage TURN shared secrets (coturn reads them from turn_secret(realm, value)).",
        discussion: """
            The newest secret of the realm signs new credentials; every secret in the table is
            accepted by coturn. Rotate, wait until the credentials signed by the old secret have
            expired (at most the maximum TTL), then retire it.
            """,
        subcommands: [Add.self, List.self, Rotate.self, Retire.self])

    struct RealmOption: ParsableArguments {
        @Option(help: "TURN realm (default: serve's, WIMZ_TURN_REALM, else wimz).") var realm: String?
        var resolved: String {
            get throws {
                let name = try realm ?? relaySettings(["WIMZ_TURN_REALM"]).turnRealm
                guard DeviceID(name) != nil else { throw CLIError("the realm must match [A-Za-z0-9_.-]{1,64}") }
                return name
            }
        }
    }

    struct Add: ParsableCommand {
        static let configuration = CommandConfiguration(abstract: "Add a secret (random when --value is not given); it signs from now on.")
        @OptionGroup var database: DatabaseOptions
        @OptionGroup var realm: RealmOption
        @Option(help: "The secret (at least 16 characters); default: 256 random bits.") var value: String?

        func run() throws {
            let db = try database.connect()
            let secret = try storeCall { try TurnRepository(db).add(realm: try realm.resolved, value: value, actor: "cli") }
            print("added TURN secret \(secret.id) (\(secret.masked)) in realm \(secret.realm); it now signs new credentials")
        }
    }

    struct Rotate: ParsableCommand {
        static let configuration = CommandConfiguration(abstract: "Add a new random secret; older ones stay valid at coturn until retired.")
        @OptionGroup var database: DatabaseOptions
        @OptionGroup var realm: RealmOption

        func run() throws {
            let db = try database.connect()
            let secret = try storeCall {
                try TurnRepository(db).add(realm: try realm.resolved, value: nil, actor: "cli", kind: .turnSecretRotated)
            }
            print("rotated: TURN secret \(secret.id) (\(secret.masked)) now signs in realm \(secret.realm)")
        }
    }

    struct List: ParsableCommand {
        static let configuration = CommandConfiguration(abstract: "List secrets (masked), newest first.")
        @OptionGroup var database: DatabaseOptions
        @OptionGroup var realm: RealmOption

        func run() throws {
            let db = try database.connect()
            let secrets = try storeCall { try TurnRepository(db).secrets(realm: try realm.resolved) }
            printTable(["ID", "REALM", "SECRET", "CREATED", "ROLE"], secrets.enumerated().map { i, s in
                [String(s.id), s.realm, s.masked, s.createdAt.iso8601, i == 0 ? "signing" : "accepted"]
            })
        }
    }

    struct Retire: ParsableCommand {
        static let configuration = CommandConfiguration(abstract: "Delete a secret: coturn stops accepting credentials it signed.")
        @OptionGroup var database: DatabaseOptions
        @Argument(help: "Secret id (from 'turn-secret list').") var id: Int64
        @Flag(help: "Retire even though credentials it signed are still valid.") var force = false

        func run() throws {
            let db = try database.connect()
            let secret = try storeCall { try TurnRepository(db).retire(id: id, force: force, actor: "cli") }
            print("retired TURN secret \(secret.id) (\(secret.masked)) of realm \(secret.realm)")
        }
    }
}
