/// Keeps secrets out of logs: bearer tokens and `token=` query values.
public enum Redaction {
    /// The token of an `Authorization: Bearer <token>` value (scheme case-insensitive), nil for
    /// any other scheme or an empty token.
    public static func bearerToken(fromAuthorization header: String) -> String? {
        let parts = header.split(separator: " ", maxSplits: 1)
        guard parts.count == 2, parts[0].lowercased() == "bearer" else { return nil }
        let token = String(parts[1].drop { $0 == " " })
        return token.isEmpty ? nil : token
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
