import ArgumentParser
import RelayCore
import RelayStore

/// `wimz-relay pairing-code --device ID`: support staff mint a code for a robot owner (the robot
/// itself mints them with POST /api/devices/ID/pairing-codes).
struct PairingCodeCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "pairing-code",
        abstract: "Mint a pairing code an app redeems for an app token (POST /api/pairing). The code is printed alone on the last line.")
    @OptionGroup var database: DatabaseOptions
    @Option(help: "Device id.") var device: String
    @Option(name: .customLong("expires-in"), help: "Seconds the code stays valid (default: serve's, WIMZ_PAIRING_CODE_TTL).")
    var expiresIn: Int?

    func run() throws {
        let deviceID = try parseDeviceID(device)
        let expiresIn = try expiresIn ?? relaySettings(["WIMZ_PAIRING_CODE_TTL"]).pairingCodeSeconds
        let range = RelayConfiguration.pairingCodeRange
        guard range.contains(Double(expiresIn)) else { throw CLIError("--expires-in must be \(range.text) seconds") }
        let db = try database.connect()
        let minted = try storeCall { try PairingRepository(db).create(device: deviceID, ttl: expiresIn, actor: "cli", address: nil) }
        print("pairing code for device \(deviceID), single use, valid until \(minted.expiresAt.iso8601)")
        print(minted.code)
    }
}
