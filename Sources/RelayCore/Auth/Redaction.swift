/// Keeps secrets out of logs: bearer tokens and `token=` query values.
public enum Redaction {
    /// The token of an `Authorization: Bearer <token>` value (scheme case-insensitive), nil for
    /// any other scheme or an empty token.
    /// Read on the string's bytes in place (a generic `split` and `lowercased()` cost ~5,000
    /// instructions a handshake, generic views of the UTF-8 ~2,000).
    public static func bearerToken(fromAuthorization header: String) -> String? {
        var header = header
        return header.withUTF8 { bytes -> String? in
            let space = UInt8(ascii: " ")
            var i = 0
            while i < bytes.count, bytes[i] == space { i += 1 }
            let scheme = i
            while i < bytes.count, bytes[i] != space { i += 1 }
            let bearer: StaticString = "bearer"
            guard i < bytes.count, i - scheme == bearer.utf8CodeUnitCount else { return nil }
            // ASCII case folding: OR-ing 0x20 turns only the capitals into their small letters.
            for k in 0..<bearer.utf8CodeUnitCount where bytes[scheme + k] | 0x20 != bearer.utf8Start[k] { return nil }
            while i < bytes.count, bytes[i] == space { i += 1 }
            return i == bytes.count ? nil : String(decoding: UnsafeBufferPointer(rebasing: bytes[i...]), as: UTF8.self)
        }
    }

    /// Replaces the value of every `token=` query argument with `REDACTED`.
    public static func redactQuery(_ uri: String) -> String {
        let marker = Array("token=".utf8)
        let bytes = Array(uri.utf8)
        guard bytes.count >= marker.count else { return uri }
        var out: [UInt8] = []
        var i = 0
        var changed = false
        while i < bytes.count {
            if bytes[i] == marker[0], i + marker.count <= bytes.count, bytes[i..<i + marker.count].elementsEqual(marker) {
                out += marker
                out += Array("REDACTED".utf8)
                i += marker.count
                while i < bytes.count, bytes[i] != UInt8(ascii: "&") { i += 1 }
                changed = true
            } else {
                out.append(bytes[i])
                i += 1
            }
        }
        return changed ? String(decoding: out, as: UTF8.self) : uri
    }
}
