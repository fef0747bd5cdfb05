import Foundation

/// The robot's answer to a command.
public struct CommandResponse: Sendable, Equatable {
    /// The id this client gave the command.
    public var id: String
    /// The robot's `ok` (true when it sent none).
    public var ok: Bool
    /// The robot's `data`.
    public var data: JSON
    /// The robot's `error` when `ok` is false.
    public var error: JSON?
    /// The whole response.
    public var message: JSON
}

/// A command for the robot, typed: its name on the wire, its parameters (the value itself,
/// encoded with the robot's snake_case keys) and the reply the response's `data` decodes to.
/// WimzRobot provides the guide's (`StartMission`, `SetMode`, …); an app adds its own the same
/// way, and ``RelayClient/send(command:data:timeout:)`` takes anything else as JSON.
///
/// ```swift
/// let started = try await client.send(StartMission(missionName: "sit_training"))
/// if started.success == true { … }
/// ```
public protocol RobotCommand: Encodable, Sendable {
    associatedtype Reply: Decodable & Sendable
    /// The frame's `command`.
    static var name: String { get }
}

extension RelayClient {
    /// Sends `command` and returns the robot's reply, typed.
    /// - Throws: what ``send(command:data:timeout:)`` throws (a cancelled caller included),
    ///   ``RelayClientError/commandFailed(code:message:)`` when the robot answered `ok` false, and
    ///   ``RelayClientError/invalidResponse(_:)`` when its `data` is not a `Reply`.
    public func send<Command: RobotCommand>(_ command: Command, timeout: Duration? = nil) async throws -> Command.Reply {
        let response = try await send(command: Command.name, data: try command.parameters(), timeout: timeout)
        guard response.ok else {
            let error = response.error
            throw RelayClientError.commandFailed(code: error?["code"]?.stringValue,
                                                 message: error?["message"]?.stringValue ?? error?.stringValue ?? "")
        }
        do {
            return try response.data.decode(Command.Reply.self, snakeCaseKeys: true)
        } catch {
            throw RelayClientError.invalidResponse("\(Command.name): \(response.data.text.prefix(200))")
        }
    }
}

extension RobotCommand {
    /// The frame's `data`: this command's snake_case JSON (integers exact).
    public func parameters() throws -> JSON {
        let encoder = JSONEncoder()
        encoder.keyEncodingStrategy = .convertToSnakeCase
        return try JSONDecoder().decode(JSON.self, from: encoder.encode(self))
    }
}
