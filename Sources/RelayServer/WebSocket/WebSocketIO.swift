#if canImport(Glibc)
import Glibc
#endif
import CLibWebSockets
import WimzProtocol

/// What the WebSocket endpoint asks of the socket layer about one connection (`socket` is its
/// lws handle). The daemon's is `LWSWebSocketIO`; the in-process tests give the endpoint one that
/// records, so sessions run there without lws, over made-up handles and the manual clock.
protocol WebSocketIO: AnyObject {
    /// The frame of the message fragment being received (called from RECEIVE only).
    func fragment(_ socket: OpaquePointer) -> ReceivedFragment
    /// Asks for a WRITEABLE callback.
    func requestWritable(_ socket: OpaquePointer)
    /// Lets out what the kernel holds back for `socket` (the gate corks upgrades).
    func uncork(_ socket: OpaquePointer)
    /// Writes bytes that are already framed (`LWS_PRE` bytes before `bytes` are ours to use).
    /// False when the connection failed.
    func writeFramed(_ socket: OpaquePointer, _ bytes: UnsafeMutablePointer<UInt8>, count: Int) -> Bool
    /// Whether `writeDirectly` may be used now: a plain socket (not TLS, which lws serves itself
    /// where there is no gate) for which lws holds back no bytes of its own (its 101).
    func canWriteDirectly(_ socket: OpaquePointer) -> Bool
    /// Writes framed bytes straight to the (non-blocking) socket, past lws; returns how many the kernel took
    /// (0 on an error: lws finds the broken socket at its own next write or read).
    func writeDirectly(_ socket: OpaquePointer, _ bytes: UnsafePointer<UInt8>, count: Int) -> Int
    /// The close frame to send as the connection closes (from WRITEABLE, which then returns -1).
    func setCloseReason(_ socket: OpaquePointer, code: CloseCode, reason: String)
    /// Drops the connection without a close handshake (a silent peer, a close never let out).
    func drop(_ socket: OpaquePointer)
    /// The relay let a close frame out on `socket` and lws is about to close it: keep it open
    /// until the peer has it (see `LingeringCloser`). Called from CLOSED.
    func lingerAfterClose(_ socket: OpaquePointer, now: UInt64)
    /// Lets lingering closes progress (every wheel tick).
    func tickLingering(now: UInt64)
}

/// Where a received chunk sits in its message (lws may hand one frame over in several chunks).
struct ReceivedFragment {
    /// The message's first chunk.
    var isFirst: Bool
    /// The message's last chunk: its final frame, nothing of that frame left to come.
    var isLast: Bool
    /// Bytes of this frame still to come after this chunk.
    var remaining: Int
    var isBinary: Bool
}

/// The socket layer as lws provides it.
final class LWSWebSocketIO: WebSocketIO {
    /// nil where lws serves TLS itself (no gate, so no way to its event loop's epoll set): there
    /// a close stays as lws makes it.
    private let closer: LingeringCloser?

    init(closer: LingeringCloser?) { self.closer = closer }

    func fragment(_ socket: OpaquePointer) -> ReceivedFragment {
        let remaining = Int(lws_remaining_packet_payload(socket))
        return ReceivedFragment(isFirst: lws_is_first_fragment(socket) != 0,
                                isLast: remaining == 0 && lws_is_final_fragment(socket) != 0,
                                remaining: remaining, isBinary: lws_frame_is_binary(socket) != 0)
    }

    func requestWritable(_ socket: OpaquePointer) { lws_callback_on_writable(socket) }

    func uncork(_ socket: OpaquePointer) { TCPCork.set(lws_get_socket_fd(socket), false) }

    func writeFramed(_ socket: OpaquePointer, _ bytes: UnsafeMutablePointer<UInt8>, count: Int) -> Bool {
        lws_write(socket, bytes, count, CLibWebSockets_LWS_WRITE_RAW()) >= count
    }

    func canWriteDirectly(_ socket: OpaquePointer) -> Bool { lws_is_ssl(socket) == 0 && lws_partial_buffered(socket) == 0 }

    func writeDirectly(_ socket: OpaquePointer, _ bytes: UnsafePointer<UInt8>, count: Int) -> Int {
        max(0, send(lws_get_socket_fd(socket), bytes, count, Int32(MSG_NOSIGNAL)))
    }

    func setCloseReason(_ socket: OpaquePointer, code: CloseCode, reason: String) {
        var bytes = Array(reason.utf8.prefix(120))
        lws_close_reason(socket, lws_close_status(UInt32(code.rawValue)), &bytes, bytes.count)
    }

    func drop(_ socket: OpaquePointer) { lws_set_timeout(socket, PENDING_TIMEOUT_USER_OK, LWS_TO_KILL_ASYNC) }

    func lingerAfterClose(_ socket: OpaquePointer, now: UInt64) { closer?.take(lws_get_socket_fd(socket), now: now) }

    func tickLingering(now: UInt64) { closer?.tick(now: now) }
}
