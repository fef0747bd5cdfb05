import CLibWebSockets
import RelayCore

/// A WebSocket's server-side state: the relay `Session` plus what only the socket layer needs
/// (the lws handle and the message being reassembled). Retained by the lws per-session data
/// from ESTABLISHED to CLOSED.
final class Connection: SessionTransport {
    let wsi: OpaquePointer
    let session: Session
    /// Bytes of the message being received (fragments and lws chunks appended).
    var receiving: [UInt8] = []
    var receivingBinary = false
    /// Set once the over-size close has been decided, so the rest of the frame is ignored.
    var rejected = false

    init(wsi: OpaquePointer, session: Session) {
        self.wsi = wsi
        self.session = session
    }

    func requestWrite() {
        // A closing socket whose peer never reads would never become writeable: bound the wait.
        if session.closing != nil { lws_set_timeout(wsi, PENDING_TIMEOUT_USER_OK, 5) }
        lws_callback_on_writable(wsi)
    }

    /// The Connection stored in an lws per-session data block (nil for plain HTTP).
    static func from(user: UnsafeMutableRawPointer?) -> Connection? {
        guard let raw = user?.load(as: UnsafeMutableRawPointer?.self) else { return nil }
        return Unmanaged<Connection>.fromOpaque(raw).takeUnretainedValue()
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

/// Frames queued messages by hand into one buffer and gives lws the lot as one
/// `LWS_WRITE_RAW` write per WRITEABLE: one send() for many messages. Valid because the relay
/// negotiates no extension (no permessage-deflate), so frames are plain RFC 6455 server
/// frames (unmasked), and lws inserts its own control frames only between our writes.
final class FrameWriter {
    let headroom = CLibWebSockets_LWS_PRE()
    let capacity: Int
    private let buffer: UnsafeMutablePointer<UInt8>

    /// `capacity` must hold the largest message plus its 10-byte header and a ping frame.
    init(capacity: Int) {
        self.capacity = capacity
        buffer = .allocate(capacity: headroom + capacity)
    }

    deinit { buffer.deallocate() }

    /// Writes as many queued messages as fit (at least one), plus a ping if due.
    /// Returns false if the connection failed.
    func drain(_ connection: Connection) -> Bool {
        let session = connection.session
        let start = buffer + headroom
        var length = 0
        if session.pingDue {
            // A non-empty payload: lws 4.1 does not pass zero-length PONGs to the callback.
            let ping: [UInt8] = [0x89, 4, UInt8(ascii: "w"), UInt8(ascii: "i"), UInt8(ascii: "m"), UInt8(ascii: "z")]
            for (k, b) in ping.enumerated() { start[k] = b }
            length = ping.count
            session.pingDue = false
        }
        while let payload = session.queue.first {
            let count = payload.bytes.count
            let header = count < 126 ? 2 : count < 65536 ? 4 : 10
            guard length + header + count <= capacity else { break }
            var p = start + length
            p[0] = 0x80 | (payload.isBinary ? 2 : 1)
            switch header {
            case 2:
                p[1] = UInt8(count)
            case 4:
                p[1] = 126
                p[2] = UInt8(count >> 8)
                p[3] = UInt8(count & 0xff)
            default:
                p[1] = 127
                for k in 0..<8 { p[2 + k] = UInt8((UInt64(count) >> (56 - 8 * UInt64(k))) & 0xff) }
            }
            p += header
            payload.bytes.withUnsafeBufferPointer { src in
                if let base = src.baseAddress { p.update(from: base, count: count) }
            }
            length += header + count
            session.messagesOut += 1
            session.bytesOut += count
            _ = session.queue.popFirst()
        }
        guard length > 0 else { return true }
        return lws_write(connection.wsi, start, length, CLibWebSockets_LWS_WRITE_RAW()) >= length
    }
}
