import CLibWebSockets
import RelayCore

#if canImport(Glibc)
import Glibc
#endif

/// Thin, allocation-light helpers over one `struct lws *` (an HTTP request or a socket).
/// Valid only inside the callback that received the pointer.
struct LWSConnection {
    let wsi: OpaquePointer

    /// A header by lws token, or nil when absent (or longer than `limit`).
    func header(_ token: lws_token_indexes, limit: Int = 4096) -> String? {
        let length = Int(lws_hdr_total_length(wsi, token))
        guard length > 0, length <= limit else { return nil }
        var buffer = [CChar](repeating: 0, count: length + 1)
        guard lws_hdr_copy(wsi, &buffer, Int32(buffer.count), token) >= 0 else { return nil }
        return String(cBuffer: buffer)
    }

    /// A custom header such as `x-forwarded-for:` (lower case, with the colon).
    func customHeader(_ name: String, limit: Int = 1024) -> String? {
        let length = Int(lws_hdr_custom_length(wsi, name, Int32(name.utf8.count)))
        guard length > 0, length <= limit else { return nil }
        var buffer = [CChar](repeating: 0, count: length + 1)
        guard lws_hdr_custom_copy(wsi, &buffer, Int32(buffer.count), name, Int32(name.utf8.count)) >= 0 else {
            return nil
        }
        return String(cBuffer: buffer)
    }

    /// A query argument, URL-decoded (lws matches `name=` as a prefix, so pass it with `=`).
    /// The buffer is large enough for any sane argument: lws stops at the first argument
    /// that does not fit, which would hide the ones after it.
    func queryArgument(_ nameWithEquals: String) -> String? {
        var buffer = [CChar](repeating: 0, count: 1024)
        guard let value = lws_get_urlarg_by_name(wsi, nameWithEquals, &buffer, Int32(buffer.count)) else {
            return nil
        }
        return String(cString: value)
    }

    /// The peer's IP address as text.
    var peerAddress: String {
        var buffer = [CChar](repeating: 0, count: 64)
        guard lws_get_peer_simple(wsi, &buffer, buffer.count) != nil else { return "unknown" }
        return String(cBuffer: buffer)
    }

    /// The request method and path (without query).
    var methodAndPath: (method: String, path: String) {
        var uri: UnsafeMutablePointer<CChar>?
        var length: Int32 = 0
        let method = lws_http_get_uri_and_method(wsi, &uri, &length)
        let path = uri.map { String(decoding: UnsafeRawBufferPointer(start: $0, count: Int(length)), as: UTF8.self) } ?? ""
        let names = ["GET", "POST", "OPTIONS", "PUT", "PATCH", "DELETE", "CONNECT", "HEAD"]
        return (method >= 0 && Int(method) < names.count ? names[Int(method)] : "OTHER", path)
    }

    /// Writes a whole response (headers and body in one write, as lws does for HTTP/1).
    /// Returns false if the connection must be closed.
    /// Writes `response` in one go. `asHTTP11` writes the status line itself: lws 4.1 answers
    /// a request it has not dispatched as HTTP (a refused WebSocket upgrade) with "HTTP/1.0",
    /// which strict WebSocket clients (Python's websockets) refuse to parse, losing the status.
    func send(_ response: HTTPResponse, asHTTP11: Bool = false) -> Bool {
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
        var contentType = Array(response.contentType.utf8)
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
