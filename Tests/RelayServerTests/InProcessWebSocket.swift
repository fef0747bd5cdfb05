import Foundation
import RelayCore
@testable import RelayServer
import WimzProtocol

/// The WebSocket endpoint's socket layer in a test: it records what the endpoint writes, asks
/// for and closes, per made-up socket handle, and reports the fragment a test says is arriving.
final class RecordingWebSocketIO: WebSocketIO {
    /// One socket as the endpoint left it.
    struct Socket {
        /// Frames written, in order: opcode and payload (server frames, unmasked).
        var frames: [(opcode: UInt8, payload: [UInt8])] = []
        /// WRITEABLE callbacks asked for and not yet given.
        var writablePending = false
        var closeFrame: (code: CloseCode, reason: String)?
        var dropped = false
        /// CLOSED came after the relay's close frame: the socket was to linger.
        var lingered = false
        /// Times the endpoint let corked bytes out.
        var uncorks = 0
        /// Bytes written past lws, straight to the socket (the first messages).
        var directBytes = 0
        /// Written bytes not yet a whole frame (a direct write the kernel took part of).
        var partial: [UInt8] = []
    }

    private(set) var sockets: [OpaquePointer: Socket] = [:]
    /// What `fragment(_:)` reports for the next received chunk.
    var arriving = ReceivedFragment(isFirst: true, isLast: true, remaining: 0, isBinary: false)
    /// How many bytes a direct write gets into the kernel; nil: direct writes may not be used
    /// (a TLS socket, or lws holding bytes back).
    var directWriteTakes: Int? = .max

    func fragment(_ socket: OpaquePointer) -> ReceivedFragment { arriving }

    func requestWritable(_ socket: OpaquePointer) { sockets[socket, default: Socket()].writablePending = true }

    func uncork(_ socket: OpaquePointer) { sockets[socket, default: Socket()].uncorks += 1 }

    func writeFramed(_ socket: OpaquePointer, _ bytes: UnsafeMutablePointer<UInt8>, count: Int) -> Bool {
        record(socket, UnsafeBufferPointer(start: bytes, count: count))
        precondition(sockets[socket]?.partial.isEmpty ?? true, "a write ended inside a frame")
        return true
    }

    func canWriteDirectly(_ socket: OpaquePointer) -> Bool { directWriteTakes != nil }

    func writeDirectly(_ socket: OpaquePointer, _ bytes: UnsafePointer<UInt8>, count: Int) -> Int {
        let taken = min(count, directWriteTakes ?? 0)
        record(socket, UnsafeBufferPointer(start: bytes, count: taken))
        sockets[socket, default: Socket()].directBytes += taken
        return taken
    }

    /// Appends written bytes to the socket's stream and records every whole frame in it.
    private func record(_ socket: OpaquePointer, _ bytes: UnsafeBufferPointer<UInt8>) {
        var stream = sockets[socket, default: Socket()].partial + Array(bytes)
        while let header = stream.withUnsafeBufferPointer(WebSocketFrame.readHeader),
              stream.count >= header.size + header.payloadLength {
            precondition(!header.masked && header.fin, "not a server frame")
            sockets[socket, default: Socket()].frames.append((header.opcode, Array(stream[header.size..<header.size + header.payloadLength])))
            stream.removeFirst(header.size + header.payloadLength)
        }
        sockets[socket, default: Socket()].partial = stream
    }

    func setCloseReason(_ socket: OpaquePointer, code: CloseCode, reason: String) {
        sockets[socket, default: Socket()].closeFrame = (code, reason)
    }

    func drop(_ socket: OpaquePointer) { sockets[socket, default: Socket()].dropped = true }

    func lingerAfterClose(_ socket: OpaquePointer, now: UInt64) { sockets[socket, default: Socket()].lingered = true }

    func tickLingering(now: UInt64) {}

    /// Takes the pending WRITEABLE request of `socket`, if there is one.
    func takeWritable(_ socket: OpaquePointer) -> Bool {
        guard sockets[socket]?.writablePending == true else { return false }
        sockets[socket]?.writablePending = false
        return true
    }
}

/// A WebSocket connection of the in-process relay: the handle lws would have given it, its
/// per-session data and what the relay has sent on it.
final class InProcessSocket {
    let handle: OpaquePointer
    /// The per-session data block lws would own (the endpoint stores the connection in it).
    let user = UnsafeMutableRawPointer.allocate(byteCount: MemoryLayout<UnsafeMutableRawPointer?>.size, alignment: 8)
    private(set) var closed = false
    /// Held strongly: a socket outliving its relay in a test must still close through it.
    private let relay: InProcessRelay

    init(handle: OpaquePointer, relay: InProcessRelay) {
        self.handle = handle
        self.relay = relay
        user.storeBytes(of: nil, as: UnsafeMutableRawPointer?.self)
    }

    deinit {
        if !closed { relay.components.webSocket.closed(user) }
        user.deallocate()
    }

    var connection: Connection? { Connection.from(user: user) }
    private var io: RecordingWebSocketIO { relay.webSocketIO }
    private var recorded: RecordingWebSocketIO.Socket { io.sockets[handle] ?? .init() }

    /// Text messages received, decoded as JSON objects.
    var messages: [[String: Any]] {
        recorded.frames.filter { $0.opcode == WebSocketFrame.text }
            .compactMap { try? JSONSerialization.jsonObject(with: Data($0.payload)) as? [String: Any] }
    }
    var pings: Int { recorded.frames.filter { $0.opcode == WebSocketFrame.ping }.count }
    var closeFrame: (code: CloseCode, reason: String)? { recorded.closeFrame }
    var dropped: Bool { recorded.dropped }
    var lingered: Bool { recorded.lingered }
    var uncorks: Int { recorded.uncorks }
    var directBytes: Int { recorded.directBytes }
    var writablePending: Bool { recorded.writablePending }

    /// Delivers `text` as one chunk with the given place in its message (a whole message by default).
    func receive(_ text: String, first: Bool = true, last: Bool = true, remaining: Int = 0, binary: Bool = false) {
        receive(Array(text.utf8), first: first, last: last, remaining: remaining, binary: binary)
    }

    func receive(_ bytes: [UInt8], first: Bool = true, last: Bool = true, remaining: Int = 0, binary: Bool = false) {
        guard let connection else { return }
        io.arriving = ReceivedFragment(isFirst: first, isLast: last, remaining: remaining, isBinary: binary)
        var copy = bytes
        let result = copy.withUnsafeMutableBytes { relay.components.webSocket.receive(connection, $0.baseAddress, $0.count) }
        precondition(result == 0, "receive asked lws to close")
    }

    /// Gives the pending WRITEABLE callback, as lws would once the socket can take data; a -1
    /// from it closes the connection (CLOSED follows).
    func serviceWritable() {
        guard !closed, io.takeWritable(handle), let connection else { return }
        if relay.components.webSocket.writeable(connection) != 0 { close() }
    }

    /// lws's CLOSED: the connection ends.
    func close() {
        guard !closed else { return }
        closed = true
        relay.components.webSocket.closed(user)
    }
}

extension InProcessRelay {
    /// What an upgrade to `target` came to: a socket, or the refusal sent instead of the 101.
    enum Upgrade {
        case open(InProcessSocket)
        case refused(HTTPResponse)

        var socket: InProcessSocket? { if case .open(let socket) = self { socket } else { nil } }
        var refusal: HTTPResponse? { if case .refused(let response) = self { response } else { nil } }
    }

    /// An upgrade request to `target` on a new socket, through the endpoint's callbacks in lws's
    /// order (accepted, CONFIRM_UPGRADE, ESTABLISHED).
    func upgrade(_ target: String, token: String? = nil, peer: String = "198.51.100.7") -> Upgrade {
        var lines = [("Host", "relay"), ("Upgrade", "websocket"), ("Connection", "Upgrade"),
                     ("Sec-WebSocket-Key", "dGhlIHNhbXBsZSBub25jZQ=="), ("Sec-WebSocket-Version", "13")]
        if let token { lines.append(("Authorization", "Bearer \(token)")) }
        let text = "GET \(target) HTTP/1.1\r\n" + lines.map { "\($0.0): \($0.1)\r\n" }.joined() + "\r\n"
        guard case .complete(let parsed, _) = HTTPRequestHead.parse(Array(text.utf8)) else { fatalError("bad test upgrade \(text)") }
        let (head, refusal) = present(parsed, peer: peer)
        if let refusal { return .refused(refusal) }
        let handle = newHandle()
        let endpoint = components.webSocket
        endpoint.accepted(handle)
        if let refusal = endpoint.confirmUpgrade(HTTPRequest(client: HTTPClient(handle), head: head, peerAddress: peer), on: handle) {
            endpoint.forget(handle)
            return .refused(refusal)
        }
        let socket = InProcessSocket(handle: handle, relay: self)
        precondition(endpoint.established(handle, user: socket.user) == 0, "ESTABLISHED refused a granted upgrade")
        return .open(socket)
    }

    /// One pass of the 10 ms wheel at the clock's time, then every WRITEABLE it asked for.
    func tick(_ sockets: InProcessSocket...) {
        components.tickWheel(now: clock.monotonic)
        for socket in sockets { socket.serviceWritable() }
    }
}
