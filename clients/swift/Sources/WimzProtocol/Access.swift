/// An app token's access level (the household, v1.3): what its holder may do is the access
/// table in docs/protocol.md. Robot tokens are always `owner` in the store; the levels
/// only mean something for app tokens. Shared by the relay and the Swift client.
public enum Access: String, Sendable, CaseIterable, Codable {
    case owner, family, guest
}
