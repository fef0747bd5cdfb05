import CLibWebSockets
import RelayCore

#if canImport(Glibc)
import Glibc
#endif

/// HTTP on lws's connections: the peer's address, the head of a request lws parsed itself
/// (TLS served by lws) and the response writer.
enum LWSHTTP {
    /// The request on `wsi` as the router sees it.
    static func request(_ wsi: OpaquePointer, head: HTTPRequestHead) -> HTTPRequest {
        HTTPRequest(client: HTTPClient(wsi), head: head, peerAddress: peerAddress(of: wsi))
    }

    /// The peer's IP address of any connection lws holds (HTTP, WebSocket or the gate's raw ones).
    static func peerAddress(of wsi: OpaquePointer) -> String {
        // IPv4 (nearly every client behind the usual proxies) written here from the socket's
        // address: lws formats it through snprintf, ~1,700 instructions a connection.
        if let dotted = ipv4PeerAddress(lws_get_socket_fd(wsi)) { return dotted }
        // On the stack, read as a C string: no zero-filled array and its copy per connection.
        return withUnsafeTemporaryAllocation(of: CChar.self, capacity: 64) { buffer in
            buffer[0] = 0
            guard let base = buffer.baseAddress, lws_get_peer_simple(wsi, base, buffer.count) != nil else { return "unknown" }
            buffer[buffer.count - 1] = 0
            return String(cString: base)
        }
    }

    /// The peer's IP address of a socket lws does not hold yet (an upgrade waiting at accept).
    static func peerAddress(ofDescriptor fd: Int32) -> String {
        if let dotted = ipv4PeerAddress(fd) { return dotted }
        var address = sockaddr_in6()
        var length = socklen_t(MemoryLayout<sockaddr_in6>.size)
        let got = withUnsafeMutablePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { getpeername(fd, $0, &length) }
        }
        guard got == 0, address.sin6_family == sa_family_t(AF_INET6) else { return "unknown" }
        return withUnsafeTemporaryAllocation(of: CChar.self, capacity: Int(INET6_ADDRSTRLEN)) { text in
            guard inet_ntop(AF_INET6, &address.sin6_addr, text.baseAddress, socklen_t(text.count)) != nil else { return "unknown" }
            return String(cString: text.baseAddress!)
        }
    }

    /// `a.b.c.d` for a socket connected over IPv4, nil for any other (lws then spells it).
    private static func ipv4PeerAddress(_ fd: Int32) -> String? {
        var address = sockaddr_in()
        var length = socklen_t(MemoryLayout<sockaddr_in>.size)
        let got = withUnsafeMutablePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { getpeername(fd, $0, &length) }
        }
        guard got == 0, address.sin_family == sa_family_t(AF_INET), length == socklen_t(MemoryLayout<sockaddr_in>.size)
        else { return nil }
        return withUnsafeBytes(of: address.sin_addr.s_addr) { octets in  // network order: first octet first
            String(unsafeUninitializedCapacity: 15) { text in
                var n = 0
                for (k, octet) in octets.enumerated() {
                    if k > 0 { text[n] = UInt8(ascii: "."); n += 1 }
                    if octet >= 100 { text[n] = UInt8(ascii: "0") + octet / 100; n += 1 }
                    if octet >= 10 { text[n] = UInt8(ascii: "0") + octet / 10 % 10; n += 1 }
                    text[n] = UInt8(ascii: "0") + octet % 10
                    n += 1
                }
                return n
            }
        }
    }

    /// The head as lws reports it, for connections the gate did not read (TLS served by lws):
    /// lws has decoded the target already, so only what survived that is checked here.
    static func rebuiltHead(_ wsi: OpaquePointer) -> Result<HTTPRequestHead, RelayError> {
        var uri: UnsafeMutablePointer<CChar>?
        var length: Int32 = 0
        let method = lws_http_get_uri_and_method(wsi, &uri, &length)
        let names = ["GET", "POST", "OPTIONS", "PUT", "PATCH", "DELETE", "CONNECT", "HEAD"]
        let path = uri.map { String(decoding: UnsafeRawBufferPointer(start: $0, count: Int(length)), as: UTF8.self) } ?? "/"
        var head = HTTPRequestHead(method: method >= 0 && Int(method) < names.count ? names[Int(method)] : "OTHER", path: path)
        var buffer = [CChar](repeating: 0, count: 4096)
        var index: Int32 = 0
        while lws_hdr_copy_fragment(wsi, &buffer, Int32(buffer.count), WSI_TOKEN_HTTP_URI_ARGS, index) >= 0 {
            let pair = String(cBuffer: buffer)
            let parts = pair.split(separator: "=", maxSplits: 1, omittingEmptySubsequences: false)
            head.arguments.append(.init(name: String(parts[0]), value: parts.count > 1 ? String(parts[1]) : ""))
            index += 1
        }
        for (name, token) in [("authorization", WSI_TOKEN_HTTP_AUTHORIZATION), ("x-forwarded-for", WSI_TOKEN_X_FORWARDED_FOR),
                              ("upgrade", WSI_TOKEN_UPGRADE), ("content-length", WSI_TOKEN_HTTP_CONTENT_LENGTH),
                              ("if-match", WSI_TOKEN_HTTP_IF_MATCH)] {
            let size = Int(lws_hdr_total_length(wsi, token))
            guard size > 0, size < buffer.count, lws_hdr_copy(wsi, &buffer, Int32(buffer.count), token) >= 0 else { continue }
            head.headers.append((name, String(cBuffer: buffer)))
        }
        let texts = [head.path] + head.arguments.flatMap { [$0.name, $0.value] } + head.headers.map(\.value)
        if texts.contains(where: { $0.unicodeScalars.contains { $0.value < 0x20 || $0.value == 0x7F } }) {
            return .failure(RelayError(.badRequest, "control character in the request"))
        }
        return .success(head)
    }

    /// Writes `response` in one go. `asHTTP11` writes the status line itself: lws 4.1 answers
    /// a request it has not dispatched as HTTP (a refused WebSocket upgrade) with "HTTP/1.0",
    /// which strict WebSocket clients (Python's websockets) refuse to parse, losing the status.
    static func send(_ response: HTTPResponse, on wsi: OpaquePointer, asHTTP11: Bool = false) -> Bool {
        let pre = CLibWebSockets_LWS_PRE()
        let capacity = pre + 1024 + response.headers.reduce(0) { $0 + $1.0.utf8.count + $1.1.utf8.count + 4 }
            + response.body.count
        let buffer = UnsafeMutablePointer<UInt8>.allocate(capacity: capacity)
        defer { buffer.deallocate() }
        let start = buffer + pre
        let end = buffer + capacity
        var p: UnsafeMutablePointer<UInt8>? = start
        func add(_ name: String, _ value: String) -> Bool {
            var v = Array(value.utf8)
            return lws_add_http_header_by_name(wsi, name, &v, Int32(v.count), &p, end) == 0
        }
        if asHTTP11 {
            var statusLine = Array("HTTP/1.1 \(response.status) \(response.reasonPhrase)".utf8)
            guard lws_add_http_header_by_name(wsi, nil, &statusLine, Int32(statusLine.count), &p, end) == 0 else { return false }
        } else {
            guard lws_add_http_header_status(wsi, UInt32(response.status), &p, end) == 0 else { return false }
        }
        // Only the relay's own answers come this way (TLS served by lws has no robot route).
        var contentType = Array((response.contentType ?? "application/json").utf8)
        var length = Array(String(response.body.count).utf8)
        guard lws_add_http_header_by_token(wsi, WSI_TOKEN_HTTP_CONTENT_TYPE, &contentType, Int32(contentType.count),
                                           &p, end) == 0,
              lws_add_http_header_by_token(wsi, WSI_TOKEN_HTTP_CONTENT_LENGTH, &length, Int32(length.count),
                                           &p, end) == 0,
              add("cache-control:", "no-store")
        else { return false }
        for (name, value) in response.headers {
            guard add(name.lowercased() + ":", value) else { return false }
        }
        guard lws_finalize_http_header(wsi, &p, end) == 0, var cursor = p else { return false }
        response.body.withUnsafeBufferPointer { body in
            if let base = body.baseAddress { cursor.update(from: base, count: body.count) }
        }
        cursor += response.body.count
        let total = cursor - start
        return lws_write(wsi, start, total, LWS_WRITE_HTTP) == total
    }
}

extension String {
    /// The NUL-terminated text in a C character buffer.
    init(cBuffer buffer: [CChar]) {
        self = String(decoding: buffer.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)
    }
}

/// The head of the request on an lws connection: the gate's exact parse, or (TLS served by lws)
/// lws's view of it.
struct RequestHeads {
    let listener: GateListener?

    func head(of wsi: OpaquePointer) -> Result<HTTPRequestHead, RelayError> {
        if let listener {
            guard let head = listener.head(of: wsi) else {
                return .failure(RelayError(.badRequest, "one request per connection"))
            }
            return .success(head)
        }
        return LWSHTTP.rebuiltHead(wsi)
    }

    /// Drops the gate's head of `wsi` once its request is answered or upgraded.
    func forget(_ wsi: OpaquePointer) { listener?.forget(wsi) }
}
