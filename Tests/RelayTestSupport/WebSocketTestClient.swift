import Foundation
import WimzProtocol

/// One WebSocket frame as received.
public struct WSFrame: Sendable, Equatable {
    public var opcode: UInt8
    public var fin: Bool
    public var payload: [UInt8]
    public var text: String { String(decoding: payload, as: UTF8.self) }
    /// Close code, for close frames.
    public var closeCode: UInt16? {
        guard opcode == 8, payload.count >= 2 else { return nil }
        return UInt16(payload[0]) << 8 | UInt16(payload[1])
    }
    public var closeReason: String { opcode == 8 && payload.count > 2 ? String(decoding: payload[2...], as: UTF8.self) : "" }
}

/// A message (reassembled from fragments).
public struct WSMessage: Sendable {
    public var isBinary: Bool
    public var payload: [UInt8]
    public var text: String { String(decoding: payload, as: UTF8.self) }
    public func json() throws -> [String: Any] {
        guard let o = try JSONSerialization.jsonObject(with: Data(payload)) as? [String: Any] else {
            throw TestSetupError("not a JSON object: \(text)")
        }
        return o
    }
}

/// A small blocking RFC 6455 client for tests: real handshake, masked frames, fragmentation,
/// pings answered automatically while reading.
public final class WebSocketTestClient: @unchecked Sendable {
    public let socket: TestSocket
    public private(set) var closeFrame: WSFrame?
    public var answerPings = true
    /// The relay's timeline notices (`{"type":"timeline",…}`, v1.6) arrive whenever entries of
    /// the device are stored — a robot's connect is one — so a test of anything else would see
    /// them at a moment it does not control: skipped unless a test turns this off.
    public var skipsTimelineNotices = true
    static let timelineNotice = Array(#"{"type":"timeline","#.utf8)

    /// Opens `path` and completes the upgrade; throws `UpgradeRefused` with the HTTP response
    /// when the server answers anything but 101.
    public init(port: Int, path: String, headers: [String: String] = [:], timeout: Double = 5) throws {
        socket = try TestSocket(port: port, timeout: timeout)
        let key = Data((0..<16).map { _ in UInt8.random(in: 0...255) }).base64EncodedString()
        var request = "GET \(path) HTTP/1.1\r\nHost: 127.0.0.1\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
            + "Sec-WebSocket-Key: \(key)\r\nSec-WebSocket-Version: 13\r\n"
        for (k, v) in headers { request += "\(k): \(v)\r\n" }
        request += "\r\n"
        try socket.send(request)
        let response = try HTTPTestClient.readResponse(socket)
        guard response.status == 101 else { throw UpgradeRefused(response: response) }
    }

    public struct UpgradeRefused: Error, CustomStringConvertible {
        public var response: HTTPTestResponse
        public var description: String { "upgrade refused: \(response.status) \(response.text)" }
    }

    /// Connects as `role` for `device` with `token` in the query (the app's way).
    public static func connect(port: Int, role: String, device: String, token: String?, useHeader: Bool = false,
                               timeout: Double = 5) throws -> WebSocketTestClient {
        var path = "/ws/\(role)?device_id=\(device)"
        var headers: [String: String] = [:]
        if let token {
            if useHeader { headers["Authorization"] = "Bearer \(token)" } else { path += "&token=\(token)" }
        }
        return try WebSocketTestClient(port: port, path: path, headers: headers, timeout: timeout)
    }

    // MARK: Sending

    public func sendFrame(opcode: UInt8, payload: [UInt8], fin: Bool = true) throws {
        let mask = (0..<4).map { _ in UInt8.random(in: 0...255) }
        var frame = WebSocketFrame.header(opcode: opcode, payloadLength: payload.count, fin: fin, mask: mask)
        frame += payload.enumerated().map { $0.element ^ mask[$0.offset & 3] }
        try socket.send(frame)
    }

    public func send(_ text: String) throws { try sendFrame(opcode: 1, payload: Array(text.utf8)) }
    public func sendBinary(_ bytes: [UInt8]) throws { try sendFrame(opcode: 2, payload: bytes) }

    /// Sends `payload` as `parts` fragments (first with `opcode`, then continuations).
    public func sendFragmented(opcode: UInt8, payload: [UInt8], parts: Int) throws {
        let size = max(1, (payload.count + parts - 1) / parts)
        var chunks = stride(from: 0, to: payload.count, by: size).map { Array(payload[$0..<min($0 + size, payload.count)]) }
        if chunks.isEmpty { chunks = [[]] }
        for (i, chunk) in chunks.enumerated() {
            try sendFrame(opcode: i == 0 ? opcode : 0, payload: chunk, fin: i == chunks.count - 1)
        }
    }

    public func close(code: UInt16 = 1000) {
        try? sendFrame(opcode: 8, payload: [UInt8(code >> 8), UInt8(code & 0xff)])
    }

    // MARK: Receiving

    public func readFrame() throws -> WSFrame {
        var head = try socket.read(exactly: 2)
        let extended = (head[1] & 0x7f) == 126 ? 2 : (head[1] & 0x7f) == 127 ? 8 : 0
        if extended > 0 { head += try socket.read(exactly: extended) }
        guard let header = head.withUnsafeBufferPointer(WebSocketFrame.readHeader) else { throw TestSetupError("bad frame header") }
        if header.masked { throw TestSetupError("server frame is masked") }
        let payload = header.payloadLength > 0 ? try socket.read(exactly: header.payloadLength) : []
        return WSFrame(opcode: header.opcode, fin: header.fin, payload: payload)
    }

    /// The next data message; answers pings; throws `Closed` on a close frame.
    public func receive() throws -> WSMessage {
        var parts: [UInt8] = []
        var binary = false
        var started = false
        while true {
            let frame = try readFrame()
            switch frame.opcode {
            case 9:
                if answerPings { try sendFrame(opcode: 10, payload: frame.payload) }
            case 10:
                continue
            case 8:
                closeFrame = frame
                throw Closed(code: frame.closeCode, reason: frame.closeReason)
            case 0, 1, 2:
                if !started {
                    binary = frame.opcode == 2
                    started = true
                }
                parts += frame.payload
                guard frame.fin else { continue }
                if skipsTimelineNotices, !binary, parts.starts(with: Self.timelineNotice) {
                    (parts, started) = ([], false)
                    continue
                }
                return WSMessage(isBinary: binary, payload: parts)
            default:
                throw TestSetupError("unexpected opcode \(frame.opcode)")
            }
        }
    }

    public struct Closed: Error, CustomStringConvertible {
        public var code: UInt16?
        public var reason: String
        public var description: String { "closed \(code.map(String.init) ?? "-") \(reason)" }
    }

    /// The next message parsed as JSON.
    public func receiveJSON() throws -> [String: Any] { try receive().json() }

    /// Reads messages until one matches `predicate` (skipping others), within the socket timeout.
    public func receive(until predicate: ([String: Any]) -> Bool) throws -> [String: Any] {
        while true {
            let message = try receive()
            if let object = try? message.json(), predicate(object) { return object }
        }
    }

    /// Reads until the server closes; returns the close code (nil on EOF without close frame).
    public func waitForClose(timeout: Double = 5) -> UInt16? {
        socket.setTimeout(timeout)
        while true {
            do { _ = try receive() } catch let closed as Closed { return closed.code } catch { return nil }
        }
    }

    /// True if nothing arrives within `seconds` (apart from pings).
    public func expectSilence(_ seconds: Double) -> Bool {
        socket.setTimeout(seconds)
        defer { socket.setTimeout(5) }
        do {
            _ = try receive()
            return false
        } catch {
            return !(error is Closed)
        }
    }
}

extension Dictionary where Key == String, Value == Any {
    /// `event` of a `{"type":"event"}` message.
    public var eventName: String? { self["type"] as? String == "event" ? self["event"] as? String : nil }
    public var dataObject: [String: Any]? { self["data"] as? [String: Any] }
}
