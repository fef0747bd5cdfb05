import ArgumentParser
import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
import WimzRelayClient
import WimzSealed

/// The sealed household (v1.5) from the terminal, as the app does it: with `--sealed-keys` the
/// demo seals what it sends and opens what the robot sealed; the commands below pair the first
/// owner on the LAN, join by an invitation link, sign members in, and share history (v1.6).
struct SealedOptions: ParsableArguments {
    @Option(name: .customLong("sealed-keys"), help: "This app's key file for sealed households (made on first use, 0600): the device is sealed for this app.") var keys: String?
    @Option(name: .customLong("robot-code"), help: "The robot's verification code (from --pair-robot, an invitation link or the robot): the robot's key is checked against it.") var robotCode: String?
    @Option(name: .customLong("pair-robot"), help: "First owner: pair with the robot's pairing address on the LAN (e.g. http://192.168.1.20:8765), hand this app's keys to the relay and sign the first roster; prints JSON, then exits.") var pairRobot: String?
    @Option(name: .customLong("join"), help: "Join by an invitation link (wimz://join?…): redeem it and hand this app's keys to the relay; prints {\"token\",\"kid\",\"robot_code\"}, then exits. No app token needed.") var join: String?
    @Flag(name: .customLong("sign-pending"), help: "Owners: sign every member whose keys the relay holds into the next roster; prints JSON, then exits.") var signPending = false
    @Option(name: .customLong("share-history"), help: "Owners: share every epoch this app holds with the family member of this kid (v1.6); prints {\"kid\",\"epochs\"}, then exits.") var shareHistory: String?
    @Flag(name: .customLong("relay-view"), help: "Print each kept event as the relay stores it next to what this app opens of it (one JSON line each), then exit.") var relayView = false

    /// The household of `--sealed-keys`, nil without it.
    func household(verifiedRobot: PublicKeys? = nil, robotCode: String? = nil) throws -> SealedHousehold? {
        try keys.map { try SealedHousehold(store: FileSealedKeyStore(url: URL(fileURLWithPath: $0)), verifiedRobot: verifiedRobot,
                                           robotCode: robotCode ?? self.robotCode) }
    }
}

struct SealedCommands {
    let options: SealedOptions
    let relay: URL
    let device: String

    /// `--join LINK`: redeems the invitation and hands over this app's keys.
    func join(_ link: String, label: String) async throws {
        guard let url = URL(string: link), let invitation = SealedInvitation(url: url), invitation.deviceID == device else {
            throw ValidationError("--join takes a wimz://join?device=\(device)&code=…&robot=… link")
        }
        let paired = try await RelayClient.pair(relay: relay, code: invitation.code, label: label)
        let client = try self.client(token: paired.token, household: options.household(robotCode: invitation.robotCode))
        let kid = try await client.joinSealedHousehold()
        print(#"{"token":"\#(paired.token)","kid":"\#(kid)","robot_code":"\#(invitation.robotCode)"}"#)
    }

    /// `--pair-robot URL`: the first owner's pairing on the LAN, its keys to the relay, the
    /// first roster signed, and the robot's first epoch opened.
    func pairRobot(_ address: String, token: String) async throws {
        guard let url = URL(string: address), let store = options.keys.map({ FileSealedKeyStore(url: URL(fileURLWithPath: $0)) }) else {
            throw ValidationError("--pair-robot takes the robot's pairing URL, with --sealed-keys")
        }
        let paired = try await SealedHousehold.pairOnLAN(robot: url, identity: try store.identity(), deviceID: device)
        let client = try self.client(token: token, household: options.household(verifiedRobot: paired.verifiedRobot))
        let kid = try await client.joinSealedHousehold()
        let epoch = try await signed(client) { try await client.signNextRoster() }
        let robot = paired.verifiedRobot!
        print(#"{"kid":"\#(kid)","robot_kid":"\#(robot.kid)","robot_code":"\#(robot.verificationCode)","epoch":\#(epoch)}"#)
    }

    /// `--sign-pending`: every member the relay holds keys for, signed into the next roster.
    func signPending(_ client: RelayClient) async throws {
        try await client.refreshSealedEpoch()
        let pending = try await client.pendingSealedMembers()
        let epoch = try await signed(client) { try await client.signNextRoster(adding: pending.map(\.rosterMember)) }
        let added = pending.map { JSONValueText.quote($0.label) }.joined(separator: ",")
        print(#"{"epoch":\#(epoch),"added":[\#(added)],"robot_key":"\#(await client.robotKeyTrust.map { "\($0)" } ?? "unknown")"}"#)
    }

    /// `--relay-view`: the relay's kept frames next to what this app opens of them.
    func relayView(_ client: RelayClient, token: String) async throws {
        var request = URLRequest(url: relayURL(relay, "/api/devices/\(device)/state"))
        request.setValue("Bearer \(token)", forHTTPHeaderField: "Authorization")
        let (data, _) = try await URLSession.shared.data(for: request)
        let stored = try JSON(parsing: String(decoding: data, as: UTF8.self))["events"]
        try await client.refreshSealedEpoch()
        let opened = try await client.lastKnownState().events
        for name in opened.keys.sorted() {
            guard let frame = stored?[name]?["message"] else { continue }
            print(#"{"event":"\#(name)","relay_stores":\#(frame.text),"app_opens":\#(opened[name]!.message.raw)}"#)
        }
    }

    private func client(token: String, household: SealedHousehold?) throws -> RelayClient {
        var configuration = RelayClient.Configuration(url: relay, deviceID: device, token: token)
        configuration.sealed = household
        return RelayClient(configuration)
    }

    /// Signs with `sign`, then waits (up to 30 s) until the robot has stored the roster's epoch
    /// and this app has opened its package of it; returns the epoch.
    private func signed(_ client: RelayClient, _ sign: () async throws -> Int) async throws -> Int {
        let epoch = try await sign()
        let deadline = ContinuousClock.now + .seconds(30)
        while ContinuousClock.now < deadline {
            if (try? await client.refreshSealedEpoch()) == epoch { return epoch }
            try await Task.sleep(for: .milliseconds(200))
        }
        throw ValidationError("the robot did not take epoch \(epoch) within 30 s: is it connected, with its first owner pinned?")
    }

    /// Runs whichever of the commands was asked for; false when none was.
    static func run(_ demo: AppDemo, token: String, client: RelayClient) async throws -> Bool {
        let commands = SealedCommands(options: demo.sealed, relay: URL(string: demo.url)!, device: demo.device)
        return try await exitingOnRefusal {
            if let address = demo.sealed.pairRobot {
                try await commands.pairRobot(address, token: token)
            } else if demo.sealed.signPending {
                try await commands.signPending(client)
            } else if let kid = demo.sealed.shareHistory {
                try await client.refreshSealedEpoch()
                let epochs = try await client.shareHistory(with: kid).map(String.init).joined(separator: ",")
                print(#"{"kid":"\#(kid)","epochs":[\#(epochs)]}"#)
            } else if demo.sealed.relayView {
                try await commands.relayView(client, token: token)
            } else {
                return false
            }
            return true
        }
    }
}
