import Foundation
import RelayCore
@testable import RelayServer
import Testing

/// The gate's sockets in a test: what each client has sent and not yet had read, what the gate
/// wrote back, and the lws calls it made. Writes take `writeCapacity` bytes at a time.
final class ScriptedGateIO: GateIO {
    struct Socket {
        var incoming: [UInt8] = []
        var clientDone = false
        var output: [UInt8] = []
        var writesShut = false
        var closingSoon = false
        var closeAfter: Int32?
        var paused = false
        var wantsWritable = false
        var handedOver: HTTPRequestHead?
    }

    var sockets: [OpaquePointer: Socket] = [:]
    /// Bytes a write takes before the socket would block (until the test raises it again).
    var writeCapacity = Int.max

    private func take(_ socket: OpaquePointer, into buffer: UnsafeMutableRawBufferPointer, removing: Bool) -> GateIOResult {
        let incoming = sockets[socket]?.incoming ?? []
        guard !incoming.isEmpty else { return sockets[socket]?.clientDone == true ? .ended : .wouldBlock }
        let n = min(buffer.count, incoming.count)
        buffer.copyBytes(from: incoming[..<n])
        if removing { sockets[socket]?.incoming.removeFirst(n) }
        return .bytes(n)
    }

    func peek(_ socket: OpaquePointer, into buffer: UnsafeMutableRawBufferPointer) -> GateIOResult {
        take(socket, into: buffer, removing: false)
    }

    func read(_ socket: OpaquePointer, into buffer: UnsafeMutableRawBufferPointer) -> GateIOResult {
        take(socket, into: buffer, removing: true)
    }

    func write(_ socket: OpaquePointer, _ bytes: UnsafeRawBufferPointer) -> GateIOResult {
        let n = min(bytes.count, writeCapacity)
        guard n > 0 else { return .wouldBlock }
        sockets[socket, default: Socket()].output += bytes.prefix(n)
        writeCapacity -= n
        return .bytes(n)
    }

    func shutdownWrites(_ socket: OpaquePointer) { sockets[socket, default: Socket()].writesShut = true }
    func closeSoon(_ socket: OpaquePointer) { sockets[socket, default: Socket()].closingSoon = true }
    func closeAfter(_ socket: OpaquePointer, seconds: Int32) { sockets[socket, default: Socket()].closeAfter = seconds }
    func pauseReading(_ socket: OpaquePointer) { sockets[socket, default: Socket()].paused = true }
    func resumeReading(_ socket: OpaquePointer) { sockets[socket, default: Socket()].paused = false }
    func requestWritable(_ socket: OpaquePointer) { sockets[socket, default: Socket()].wantsWritable = true }
    func peerAddress(_ socket: OpaquePointer) -> String { "203.0.113.9" }
    func handOver(_ socket: OpaquePointer, head: HTTPRequestHead) { sockets[socket, default: Socket()].handedOver = head }
}

extension HTTPGateTests {
    /// The gate over scripted sockets, and the server it hands requests to (its handler).
    final class Harness: HTTPGateHandler {
        let io = ScriptedGateIO()
        let clock = ManualClock()
        let lingering: GateLingering
        /// Made at the end of init: the gate is given its handler, this harness.
        private(set) var gate: HTTPGate!
        /// Requests the gate handed to the server: head and body.
        var served: [(head: HTTPRequestHead, body: [UInt8])] = []
        var refused: [(RelayError, String)] = []
        /// Heads the server admitted or refused, in order.
        var admitted: [HTTPRequestHead] = []
        /// What the server answers (nil: later, through `respond`).
        var answer: HTTPResponse? = .json(200, .object([("ok", true)]))
        /// What the server says of a head before its body (nil: read on).
        var headRefusal: HTTPResponse?
        var bodyLimits: (HTTPRequestHead) -> Int = { _ in HTTPGate.bodyLimit }
        /// How the server holds a head for its token (nil: it holds none).
        var holdForCredential: ((HTTPRequestHead, @escaping () -> Void) -> CredentialWait)?
        /// Tokens read off heads (each one hashed in the relay) and lookups asked for.
        var credentialsRead = 0
        var lookupsAsked = 0
        private var nextSocket = 1

        init(lingering: GateLingering = GateLingering(largestBody: HTTPGate.bodyLimit)) {
            self.lingering = lingering
            gate = HTTPGate(io: io, clock: clock.clock, handler: self, lingering: lingering)
        }

        func presentedCredential(in head: HTTPRequestHead) -> PresentedCredential? {
            credentialsRead += 1
            return PresentedCredential.token(presentedIn: head).map { PresentedCredential(token: $0, digest: Array($0.utf8)) }
        }

        func awaitCredential(for head: HTTPRequestHead, peer: () -> String, then resume: @escaping () -> Void) -> CredentialWait {
            lookupsAsked += 1
            return holdForCredential?(head, resume) ?? .ready
        }

        func admit(_ request: HTTPRequest, contentLength: Int) -> Router.Admission {
            admitted.append(request.head)
            let limit = bodyLimits(request.head)
            if contentLength > limit { return .bodyTooLarge(limit: limit) }
            if let headRefusal { return .answer(headRefusal) }
            return .admitted(Router.Routed(route: Route(["GET", "POST", "PUT"], request.head.path, .open(.healthz)), parameters: [:], entry: nil))
        }

        func serve(_ request: HTTPRequest, _ routed: Router.Routed, bodyWasRead: Bool, body: [UInt8]) -> HTTPResponse? {
            served.append((request.head, body))
            return answer
        }

        func refused(_ error: RelayError, peer: String) { refused.append((error, peer)) }
        func gateConnectionClosed(_ wsi: OpaquePointer) {}

        /// A newly accepted connection.
        func connect() -> OpaquePointer {
            let socket = newSocket()
            #expect(gate.accepted(socket) == 0)
            return socket
        }

        func newSocket() -> OpaquePointer {
            defer { nextSocket += 1 }
            return OpaquePointer(bitPattern: nextSocket)!
        }

        /// What accept makes of a connection whose socket holds `text`, and what it hands over later.
        func arrival(_ text: String, whenReady: @escaping (HTTPRequestHead, Int) -> Void = { _, _ in }) -> HTTPGate.Arrival {
            Array(text.utf8).withUnsafeBytes { gate.arrival(of: $0, peer: { "203.0.113.9" }, whenReady: whenReady) }
        }

        /// `text` arrives on `socket`; the gate reads (as lws calls it while the socket is
        /// readable). True while the socket is open.
        @discardableResult
        func send(_ text: String, on socket: OpaquePointer, thenHangUp: Bool = false) -> Bool {
            io.sockets[socket, default: .init()].incoming += Array(text.utf8)
            io.sockets[socket]?.clientDone = thenHangUp
            while io.sockets[socket]?.paused != true {
                let before = io.sockets[socket]?.incoming.count
                if gate.readable(socket) != 0 {
                    gate.closed(socket)
                    return false
                }
                if io.sockets[socket]?.incoming.count == before { break }  // nothing more it can take now
            }
            return true
        }

        func response(_ socket: OpaquePointer) -> (status: Int, headers: String, body: [String: Any]) {
            let text = String(decoding: io.sockets[socket]?.output ?? [], as: UTF8.self)
            let parts = text.components(separatedBy: "\r\n\r\n")
            let status = Int(parts[0].split(separator: " ").dropFirst().first ?? "") ?? 0
            let body = (try? JSONSerialization.jsonObject(with: Data((parts.dropFirst().first ?? "").utf8))) as? [String: Any]
            return (status, parts[0], body ?? [:])
        }
    }
}
