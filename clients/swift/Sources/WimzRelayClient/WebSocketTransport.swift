import Foundation
import WimzProtocol

/// What a WebSocket connection delivers, whole messages only (fragments are joined; pings are
/// answered by the transport).
public enum WebSocketEvent: Sendable, Equatable {
    case text(String)
    case binary([UInt8])
    /// The server pinged (the transport answered it): the connection is alive.
    case ping
    /// The connection ended: the peer's close code and reason, or nil when the TCP connection
    /// dropped without a close frame.
    case closed(code: UInt16?, reason: String)
}

/// The server answered the upgrade with something other than 101 (the relay's 401, 403, 429,
/// 503… with its JSON error body, and its code in `Wimz-Error` where the body is not at hand).
public struct WebSocketUpgradeRefused: Error, Sendable, Equatable {
    public var status: Int
    /// Header names in lower case.
    public var headers: [String: String]
    /// Empty where the transport is not handed it (URLSession).
    public var body: String

    /// The relay's refusal: its code from the body, else from the `Wimz-Error` header.
    public var relayError: RelayClientError {
        .refusal(status: status, body: Data(body.utf8), errorHeader: headers[WimzProtocol.errorHeader.lowercased()])
    }

    public init(status: Int, headers: [String: String], body: String) {
        self.status = status
        self.headers = headers
        self.body = body
    }
}

/// One open WebSocket.
public protocol WebSocketConnection: Sendable {
    /// Sends one text message.
    func send(text: String) async throws
    /// Sends one binary message.
    func send(binary: [UInt8]) async throws
    /// Sends a ping and returns when its pong arrives (the caller bounds the wait).
    func ping() async throws
    /// Every message in order, then one `.closed`, then the end. One reader only.
    var events: AsyncStream<WebSocketEvent> { get }
    /// Starts the closing handshake with `code` and releases the connection.
    func close(code: UInt16) async
    /// Ends the connection at once, with no closing handshake: the peer stopped answering, so
    /// waiting for its close would only delay the reconnect. (By default: ``close(code:)``.)
    func abort() async
}

extension WebSocketConnection {
    public func abort() async { await close(code: CloseCode.goingAway.rawValue) }
}

/// Opens WebSocket connections: SwiftNIO on Linux (``NIOWebSocketTransport``),
/// `URLSessionWebSocketTask` on Apple platforms (``URLSessionWebSocketTransport``).
public protocol WebSocketTransport: Sendable {
    /// Connects and upgrades; throws ``WebSocketUpgradeRefused`` when the server refuses the upgrade.
    func connect(to url: URL, headers: [String: String]) async throws -> any WebSocketConnection
}

/// The platform's transport.
public func defaultWebSocketTransport() -> any WebSocketTransport {
    #if canImport(Darwin)
    URLSessionWebSocketTransport()
    #else
    NIOWebSocketTransport()
    #endif
}
