import CLibWebSockets
import RelayCore
import WimzProtocol

/// A WebSocket's server-side state: the relay `Session` plus what only the socket layer needs
/// (the lws handle, its socket layer and the message being reassembled). Retained by the lws
/// per-session data from ESTABLISHED to CLOSED.
final class Connection: SessionTransport {
    let wsi: OpaquePointer
    let io: WebSocketIO
    let session: Session
    /// Where it is between ESTABLISHED and CLOSED (`State`: the transitions and what each asks for).
    private(set) var state = State.opening
    /// A message arriving in pieces (fragments, or lws chunks of a large frame).
    var incoming = Incoming.none
    /// Framed bytes of a direct write that the kernel did not take: they go first at the next
    /// WRITEABLE (`FrameWriter.drain`).
    var unsent: [UInt8] = []
    /// Unowned: the watch holds closing connections, and the server owns both.
    private unowned let closeWatch: CloseWatch

    /// A message being reassembled.
    enum Incoming {
        case none
        case assembling(bytes: [UInt8], isBinary: Bool)
        /// Over the size limit: its close is decided, the rest of the message is ignored.
        case skipping
    }

    init(wsi: OpaquePointer, io: WebSocketIO, session: Session, closeWatch: CloseWatch) {
        self.wsi = wsi
        self.io = io
        self.session = session
        self.closeWatch = closeWatch
    }

    deinit {
        // The session's unmanaged link must be gone before the connection is (`finish` clears it).
        assert(session.transport.map { $0 !== self } ?? true, "connection freed while its session still points at it")
    }

    override func requestWrite() {
        switch state.writeRequested(closing: session.closing != nil) {
        case .askWritable: io.requestWritable(wsi)
        // A close is let out by the close watch (paced, and bounded in time).
        case .watchClose: closeWatch.watch(self)
        case .none: break
        }
    }

    /// ESTABLISHED was handled (see `State.opened`).
    func opened() { state.opened() }

    /// Bytes went straight to the socket; whether the 101 must be let out now.
    func wroteDirectly() -> State.Uncork { state.wroteDirectly() }

    /// lws offers a write: what to do with it (see `State.writeable`).
    func writeable() -> State.Write { state.writeable(closing: session.closing != nil) }

    /// lws reported CLOSED; whether the socket lingers.
    func closed() -> Bool { state.closed() }

    /// The Connection stored in an lws per-session data block (nil for plain HTTP).
    static func from(user: UnsafeMutableRawPointer?) -> Connection? { unmanaged(user: user)?.takeUnretainedValue() }

    /// The same, unmanaged: a callback that only uses it for the call's length reaches it
    /// through `_withUnsafeGuaranteedRef`, without a retain and release (two per message).
    static func unmanaged(user: UnsafeMutableRawPointer?) -> Unmanaged<Connection>? {
        guard let raw = user?.load(as: UnsafeMutableRawPointer?.self) else { return nil }
        return Unmanaged<Connection>.fromOpaque(raw)
    }

    func store(in user: UnsafeMutableRawPointer) {
        user.storeBytes(of: Unmanaged.passRetained(self).toOpaque(), as: UnsafeMutableRawPointer?.self)
    }

    /// Releases the reference held by the per-session data.
    static func release(user: UnsafeMutableRawPointer?) {
        guard let user, let raw = user.load(as: UnsafeMutableRawPointer?.self) else { return }
        Unmanaged<Connection>.fromOpaque(raw).release()
        user.storeBytes(of: nil, as: UnsafeMutableRawPointer?.self)
    }
}

/// Sockets told to close. lws sends a close frame from WRITEABLE and then waits for the peer's
/// answer with a timer in its one sorted timer list: an O(sockets) insertion each, so closing
/// 20,000 sockets in one pass (a stop) cost O(n²) — 14 to 20 s of a busy service thread. Closes
/// are therefore let out `perTurn` at a time from the 10 ms session wheel (20,000 in 0.4 s, while
/// the peers' answers keep lws's list short), and each is cut off `grace` after it was let out
/// if its peer never lets the close frame through (a FIFO: every deadline is "now + grace").
final class CloseWatch {
    static let grace: UInt64 = 5_000_000_000
    static let perTurn = 500
    private var waiting: [Connection] = []
    private var waitingHead = 0
    private var deadlines = DeadlineFIFO<Connection>()

    func watch(_ connection: Connection) { waiting.append(connection) }

    /// Lets the next closes out and cuts off the expired ones (service thread, every wheel tick).
    func tick(now: UInt64) {
        var released = 0
        while waitingHead < waiting.count, released < CloseWatch.perTurn {
            let connection = waiting[waitingHead]
            waitingHead += 1
            guard connection.state.awaitsCloseRelease else { continue }  // closed, or its close already out
            connection.io.requestWritable(connection.wsi)
            deadlines.append(connection, deadline: now + CloseWatch.grace)
            released += 1
        }
        if waitingHead == waiting.count, waitingHead > 0 {
            waiting.removeAll(keepingCapacity: waiting.count <= 1024)
            waitingHead = 0
        }
        for connection in deadlines.popExpired(now: now) where !connection.state.isFinished {
            connection.io.drop(connection.wsi)
        }
    }
}

/// Frames queued messages by hand into one buffer and gives lws the lot as one
/// `LWS_WRITE_RAW` write per WRITEABLE: one send() for many messages. Valid because the relay
/// negotiates no extension (no permessage-deflate), so frames are plain RFC 6455 server
/// frames (unmasked), and lws inserts its own control frames only between our writes.
final class FrameWriter {
    let headroom = CLibWebSockets_LWS_PRE()
    let capacity: Int
    private let buffer: UnsafeMutablePointer<UInt8>
    /// Where buffers written for the last time go (the receive path takes them from there).
    private let payloads: PayloadPool

    /// `capacity` must hold the largest message plus its 10-byte header and a ping frame.
    init(capacity: Int, payloads: PayloadPool) {
        self.payloads = payloads
        self.capacity = capacity
        buffer = .allocate(capacity: headroom + capacity)
    }

    deinit { buffer.deallocate() }

    /// Writes what a direct write left (`Connection.unsent`), then as many queued messages as fit
    /// (at least one), plus a ping if due. Returns false if the connection failed.
    func drain(_ connection: Connection) -> Bool {
        let length = frame(connection)
        guard length > 0 else { return true }
        return connection.io.writeFramed(connection.wsi, buffer + headroom, count: length)
    }

    /// The same written straight to the socket (`WebSocketIO.writeDirectly`, which the caller
    /// checked may be used); what the kernel does not take waits in `connection.unsent`.
    func drainDirectly(_ connection: Connection) {
        let length = frame(connection)
        guard length > 0 else { return }
        let start = buffer + headroom
        let sent = connection.io.writeDirectly(connection.wsi, start, count: length)
        if sent < length { connection.unsent = Array(UnsafeBufferPointer(start: start + sent, count: length - sent)) }
    }

    /// Frames into the buffer (after lws's headroom) what is due for `connection`; returns the length.
    private func frame(_ connection: Connection) -> Int {
        let session = connection.session
        let start = buffer + headroom
        var length = 0
        if !connection.unsent.isEmpty {  // at most one batch: it fits
            connection.unsent.withUnsafeBufferPointer { start.update(from: $0.baseAddress!, count: $0.count) }
            length = connection.unsent.count
            connection.unsent = []
        }
        if session.pingDue, length + 10 <= capacity {  // (after a full batch left unsent: next time)
            // A non-empty payload: lws 4.1 does not pass zero-length PONGs to the callback.
            length += WebSocketFrame.writeHeader(opcode: WebSocketFrame.ping, payloadLength: 4, to: start + length)
            for b in "wimz".utf8 {
                start[length] = b
                length += 1
            }
            session.pingDue = false
        }
        let batch = session.queue.writeFrames(into: start + length, capacity: capacity - length, recycling: payloads)
        length += batch.length
        session.messagesOut += batch.messages
        session.bytesOut += batch.payloadBytes
        return length
    }
}
