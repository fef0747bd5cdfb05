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
