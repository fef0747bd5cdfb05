import ArgumentParser
import Foundation
import WimzRelayClient
import WimzRobot

/// `--live-activity-start HEX`, `--live-activity ID:HEX`, `--live-activities`: the tokens an app
/// hands over for the mission on the lock screen (docs/protocol.md v1.4), so the flow can be tried
/// by hand against an APNs stand-in: hand them over, let this exit (an app with no socket is what
/// the relay pushes to), run a mission on the robot. Each prints the relay's JSON and exits.
enum LiveActivityCommands {
    /// Runs whichever was asked for; false when none was.
    static func run(_ demo: AppDemo, client: RelayClient) async throws -> Bool {
        guard demo.liveActivityStart != nil || !demo.liveActivity.isEmpty || demo.liveActivities else { return false }
        guard let environment = PushEnvironment(rawValue: demo.pushEnvironment) else {
            throw ValidationError("--push-environment takes production or sandbox")
        }
        do {
            if let hex = demo.liveActivityStart {
                print(try encoded(try await client.registerLiveActivityStartToken(try Self.token(hex), environment: environment)))
            }
            for pair in demo.liveActivity {
                let parts = pair.split(separator: ":", maxSplits: 1).map(String.init)
                guard parts.count == 2 else { throw ValidationError("--live-activity takes ID:HEX") }
                print(try encoded(try await client.registerLiveActivity(id: parts[0], token: try Self.token(parts[1]), environment: environment)))
            }
            if demo.liveActivities { print(try encoded(try await client.liveActivities())) }
        } catch let error as RelayClientError {
            print("refused: \(error)")
            throw ExitCode(2)
        }
        return true
    }

    private static func token(_ hex: String) throws -> Data {
        guard let token = Data(hex: hex) else { throw ValidationError("a token is hex digits: \(hex)") }
        return token
    }

    private static func encoded(_ value: some Encodable) throws -> String {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys]
        return String(decoding: try encoder.encode(value), as: UTF8.self)
    }
}

/// The mission as the lock screen shows it: the activity's content state, in one line.
enum LockScreen {
    static func text(_ state: MissionActivityAttributes.ContentState) -> String {
        var parts = [state.dogName, state.trick, state.status?.replacingOccurrences(of: "_", with: " ")].compactMap { $0 }
        if let stage = state.stage, let total = state.totalStages { parts.append("stage \(stage)/\(total)") }
        if let rewards = state.rewards { parts.append("\(rewards) treats") }
        if !state.robotOnline { parts.append("robot away") }
        return parts.isEmpty ? "-" : parts.joined(separator: " · ")
    }
}
