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
            // The listen address's grammar; an IPv6 host only in brackets, and a port to dial.
            guard let (host, port) = RelayConfiguration.parseListen(String(item)), port > 0,
                  !host.contains(":") || item.hasPrefix("[") else { return nil }
            servers.append(TurnAdminServer(host: host, port: UInt16(port)))
        }
        return servers
    }
}
