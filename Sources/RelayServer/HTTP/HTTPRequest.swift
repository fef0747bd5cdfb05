import RelayCore

/// The client connection an HTTP answer goes back on: lws's handle, used only as an identity
/// outside the service layer (tests make their own).
struct HTTPClient: Hashable {
    let handle: OpaquePointer
    /// Who writes an answer that comes later (the gate, for the connections it reads; a test's
    /// recorder); nil: lws writes it when the connection turns writeable (TLS served by lws).
    unowned(unsafe) let answerer: (any DeferredAnswering)?

    init(_ handle: OpaquePointer, answeredBy answerer: (any DeferredAnswering)? = nil) {
        self.handle = handle
        self.answerer = answerer
    }

    /// Writes `response` as this connection's deferred answer; false when lws must (no answerer).
    func answer(_ response: HTTPResponse) -> Bool {
        guard let answerer else { return false }
        answerer.respond(self, with: response)
        return true
    }

    /// One connection, whoever answers it.
    static func == (a: HTTPClient, b: HTTPClient) -> Bool { a.handle == b.handle }
    func hash(into hasher: inout Hasher) { hasher.combine(handle) }
}

/// What writes a deferred answer on its connection (`HTTPGate`).
protocol DeferredAnswering: AnyObject {
    func respond(_ client: HTTPClient, with response: HTTPResponse)
}

/// One HTTP request as the router and its handlers see it: which connection, the head (the
/// gate's exact parse, or with TLS served by lws the one rebuilt from lws's view) and the peer.
/// Free of lws, so handlers run in tests without a socket.
struct HTTPRequest {
    let client: HTTPClient
    let head: HTTPRequestHead
    /// The peer's IP address as text.
    let peerAddress: String

    /// The request method and decoded path (without query).
    var methodAndPath: (method: String, path: String) { (head.method, head.path) }
}
