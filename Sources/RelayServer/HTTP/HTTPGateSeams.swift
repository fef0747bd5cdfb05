import RelayCore

// The gate's two seams: what it asks of the relay (the handler) and of its sockets (GateIO).

/// What the gate asks of the relay about the requests it reads (`HTTPGate.handler`), in the
/// order it asks: the credential, its lookup, the route and the caller, then the answer.
protocol HTTPGateHandler: AnyObject {
    /// The token a complete head presents, read and hashed once (nil: none); the gate puts it on
    /// the head, which carries it to every later check.
    func presentedCredential(in head: HTTPRequestHead) -> PresentedCredential?
    /// Asked with every complete head before it is read further: whether its token must first be
    /// read from the store (`.waiting`: `resume` is called on the service thread once it is in,
    /// and the connection waits unread meanwhile), or may not be (`.refused`: answered so).
    /// `peer` is the connection's address, asked only when needed.
    func awaitCredential(for head: HTTPRequestHead, peer: () -> String, then resume: @escaping () -> Void) -> CredentialWait
    /// A plain request's head, its token in memory: its route and caller, once, before any body
    /// is read (`contentLength`: the body announced).
    func admit(_ request: HTTPRequest, contentLength: Int) -> Router.Admission
    /// An admitted request with its whole body: the response, or nil when it comes later through
    /// `HTTPGate.respond(_:with:)` (admin requests wait for the database worker).
    func serve(_ request: HTTPRequest, _ routed: Router.Routed, bodyWasRead: Bool, body: [UInt8]) -> HTTPResponse?
    /// A head the gate refused itself (malformed, too large, a slow client): logged and counted.
    func refused(_ error: RelayError, peer: String)
    /// A connection closed: deferred work for it is dropped.
    func gateConnectionClosed(_ wsi: OpaquePointer)
}

/// What the gate asks of a connection's socket (`socket` is its raw lws handle): reads, writes
/// and lws's timeouts and flow control. ``GateListener`` in the daemon; a scripted one in tests.
protocol GateIO: AnyObject {
    /// Copies what has arrived into `buffer` without taking it off the socket.
    func peek(_ socket: OpaquePointer, into buffer: UnsafeMutableRawBufferPointer) -> GateIOResult
    func read(_ socket: OpaquePointer, into buffer: UnsafeMutableRawBufferPointer) -> GateIOResult
    func write(_ socket: OpaquePointer, _ bytes: UnsafeRawBufferPointer) -> GateIOResult
    /// Ends the sending side (the client still sends; we read and drop it).
    func shutdownWrites(_ socket: OpaquePointer)
    /// Closes the socket from the loop's next pass.
    func closeSoon(_ socket: OpaquePointer)
    /// Closes the socket `seconds` from now unless it closes first.
    func closeAfter(_ socket: OpaquePointer, seconds: Int32)
    /// No more readable callbacks for the socket.
    func pauseReading(_ socket: OpaquePointer)
    /// Readable callbacks again.
    func resumeReading(_ socket: OpaquePointer)
    /// Asks for a writeable callback.
    func requestWritable(_ socket: OpaquePointer)
    func peerAddress(_ socket: OpaquePointer) -> String
    /// Hands an upgrade on to lws as a WebSocket with `head`; the raw socket closes after.
    func handOver(_ socket: OpaquePointer, head: HTTPRequestHead)
}

/// The outcome of one read or write on a gate socket.
enum GateIOResult: Equatable {
    case bytes(Int)
    /// Nothing now (EAGAIN).
    case wouldBlock
    /// The peer closed its side (a read of 0).
    case ended
    case failed
}
