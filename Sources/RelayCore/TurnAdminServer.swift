/// One TURN server's management CLI (`WIMZ_TURN_ADMIN`, docs/protocol.md v1.3): where a removal's
/// sessions are cut.
public struct TurnAdminServer: Sendable, Equatable {
    public var host: String
    public var port: UInt16

    public init(host: String, port: UInt16) {
        self.host = host
        self.port = port
    }

    /// `host:port` (`[v6]:port`), as logged and recorded in `turn_cuts.servers_done`.
    public var name: String { host.contains(":") ? "[\(host)]:\(port)" : "\(host):\(port)" }

    /// Comma-separated `host:port` (`[v6]:port` for IPv6); nil if an item is malformed.
    public static func parseList(_ text: String) -> [TurnAdminServer]? {
        var servers: [TurnAdminServer] = []
        for raw in text.split(separator: ",") {
            let item = raw.filter { $0 != " " }
            guard !item.isEmpty else { continue }
            let host: Substring, portText: Substring
            if item.hasPrefix("["), let close = item.firstIndex(of: "]") {
                host = item[item.index(after: item.startIndex)..<close]
                let rest = item[item.index(after: close)...]
                guard rest.hasPrefix(":") else { return nil }
                portText = rest.dropFirst()
            } else {
                guard let colon = item.lastIndex(of: ":") else { return nil }
                host = item[..<colon]
                portText = item[item.index(after: colon)...]
            }
            guard !host.isEmpty, !host.contains(":") || item.hasPrefix("["), let port = UInt16(portText), port > 0 else { return nil }
            servers.append(TurnAdminServer(host: String(host), port: port))
        }
        return servers
    }
}
