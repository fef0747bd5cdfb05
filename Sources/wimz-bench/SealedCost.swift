import ArgumentParser
import Foundation
import WimzSealed

/// The app library's cost per sealed frame (issue 62 §6): the robot's 1 KB frame sealed and
/// signed, then verified and opened with the app's checks (`AppOpener`), as an iPhone does for
/// every event. Run release: `swift build -c release --product wimz-bench`.
struct SealedCost: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "sealed-cost",
        abstract: "Microseconds per 1 KB sealed frame in WimzSealed: seal + sign, and verify + open.")
    @Option(help: "Frames per round.") var frames: Int = 2_000
    @Option(help: "Rounds; the best of them is reported.") var rounds: Int = 5

    func run() throws {
        let robot = SealedIdentity(), app = SealedIdentity()
        let roster = try Roster.make(deviceID: "bench", epoch: 1, previousHash: nil, made: 0, robot: robot.publicKeys,
                                     members: [RosterMember(keys: app.publicKeys, role: .owner, control: true, until: nil, label: "")])
        let epoch = try Epoch(roster: roster, secret: Data(repeating: 1, count: 32))
        let plaintext = Data(#"{"type":"event","event":"mission_progress","data":{"pad":"\#(String(repeating: "x", count: 963))"}}"#.utf8)
        var sealing: [Double] = [], opening: [Double] = []
        for _ in 0..<rounds {
            var sealer = FrameSealer(identity: robot, deviceID: "bench")
            var opener = AppOpener(deviceID: "bench")
            opener.hold(epoch)
            var start = Date()
            let sealed = try (0..<frames).map { _ in Data(try sealer.seal(plaintext, in: epoch).utf8) }
            sealing.append(Date().timeIntervalSince(start) / Double(frames) * 1e6)
            start = Date()
            for frame in sealed { _ = try opener.open(frame) }
            opening.append(Date().timeIntervalSince(start) / Double(frames) * 1e6)
        }
        print(String(format: "app library (WimzSealed, swift-crypto), %d-byte frame, best of %d x %d: seal + sign %.1f µs, verify + open %.1f µs",
                     plaintext.count, rounds, frames, sealing.min() ?? 0, opening.min() ?? 0))
    }
}
