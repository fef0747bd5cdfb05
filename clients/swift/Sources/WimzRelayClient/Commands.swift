import Foundation

// Commands to the robot and their answers: as JSON (`send(command:data:timeout:)`) or typed
// (`RobotCommand`, `send(_:timeout:)`), each matched to its response by an id of the client's own.

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
    /// A command waiting for its answer; the answer (or the caller's cancellation) may come
    /// before the caller starts waiting.
    struct PendingCommand {
        var continuation: CheckedContinuation<CommandResponse, any Error>?
        var early: Result<CommandResponse, any Error>?
        var timeout: Task<Void, Never>?
    }

    /// Sends a command to the robot and waits for its response.
    /// - Throws: ``RelayClientError/deviceOffline(message:)`` when the robot is not connected,
    ///   ``RelayClientError/rateLimited(message:)`` when the relay dropped it,
    ///   ``RelayClientError/forbidden(code:message:)`` for a guest without control,
    ///   ``RelayClientError/timeout`` and ``RelayClientError/notConnected``; `CancellationError`
    ///   at once when the calling task is cancelled (the command is forgotten: a late answer is
    ///   dropped).
    public func send(command name: String, data: JSON = [:], timeout: Duration? = nil) async throws -> CommandResponse {
        try await awaitAnswer(timeout: timeout) { id in
            ["type": "command", "id": .string(id), "command": .string(name), "data": data]
        }
    }

    /// Sends the frame `frame(id)` makes with a fresh id, then those `following(id)` makes (a
    /// request's body in parts, paced past ``requestPartsAtOnce``), and waits until
    /// ``resolve(_:_:)`` is called for that id (the answer, a refusal, the timeout or the
    /// caller's cancellation).
    func awaitAnswer(timeout: Duration?, _ frame: (String) -> JSON, then following: (String) -> [JSON] = { _ in [] }) async throws -> CommandResponse {
        try Task.checkCancellation()
        guard let connection else { throw RelayClientError.notConnected }
        commandCount += 1
        // Sealed, the relay cannot route the answer to this app alone: every app of the device
        // gets it, so the id is drawn at random.
        let id = seal?.current == nil ? "app-\(commandCount)" : "app-\(commandCount)-\(UInt64.random(in: 0 ... .max))"
        let limit = timeout ?? configuration.commandTimeout, clock = configuration.clock
        pending[id] = PendingCommand(timeout: Task { [weak self] in
            do { try await clock.sleep(limit) } catch { return }
            await self?.resolve(id, .failure(RelayClientError.timeout))
        })
        return try await withTaskCancellationHandler {
            let text = try outgoing(frame(id).text)
            do {
                try await connection.send(text: text)
                expectAnswer()
                for (index, next) in following(id).enumerated() {
                    if index + 1 >= Self.requestPartsAtOnce { try await Task.sleep(for: .milliseconds(50)) }
                    try await connection.send(text: try outgoing(next.text))
                }
            } catch is CancellationError {
                resolve(id, .failure(CancellationError()))
            } catch {
                resolve(id, .failure(RelayClientError.notConnected))
            }
            return try await withCheckedThrowingContinuation { continuation in
                guard var command = pending[id] else { return continuation.resume(throwing: RelayClientError.notConnected) }
                if let early = command.early {
                    pending[id] = nil
                    continuation.resume(with: early)
                } else {
                    command.continuation = continuation
                    pending[id] = command
                }
            }
        } onCancel: {
            Task { await self.resolve(id, .failure(CancellationError())) }
        }
    }

    func resolve(_ id: String, _ result: Result<CommandResponse, any Error>) {
        guard var command = pending[id] else { return }
        robotHTTPParts[id] = nil
        command.timeout?.cancel()
        if let continuation = command.continuation {
            pending[id] = nil
            continuation.resume(with: result)
        } else if command.early == nil {
            command.early = result
            pending[id] = command
        }
    }

    /// Commands waiting for an answer (for tests: a cancelled one leaves none behind).
    var pendingCommands: Int { pending.count }

    func failAllPending(_ error: RelayClientError) {
        for id in Array(pending.keys) { resolve(id, .failure(error as any Error)) }
    }

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
