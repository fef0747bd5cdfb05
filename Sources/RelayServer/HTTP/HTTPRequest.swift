import RelayCore

/// The client connection an HTTP answer goes back on: lws's handle, used only as an identity
/// outside the service layer (tests make their own).
struct HTTPClient: Hashable {
    let handle: OpaquePointer
    init(_ handle: OpaquePointer) { self.handle = handle }
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
