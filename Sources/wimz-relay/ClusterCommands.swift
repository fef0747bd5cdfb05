import ArgumentParser
import RelayCore
import RelayStore

/// `wimz-relay cluster status`: the members of the cluster as the database records them.
struct ClusterCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "cluster", abstract: "Inspect the relay nodes sharing this database.",
        subcommands: [Status.self])

    struct Status: ParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "List nodes: id, address, lease age, sockets, devices; and devices split across nodes.")
        @OptionGroup var database: DatabaseOptions

        func run() throws {
            let db = try database.connect()
            let (nodes, split) = try storeCall { (try ClusterRepository(db).nodes(), try ClusterRepository(db).splitDevices()) }
            printTable(["NODE", "ADDRESS", "STATE", "LEASE AGE", "SOCKETS", "DEVICES", "STARTED"], nodes.map { n in
                [n.nodeID, n.address, !n.isLive ? "expired" : n.draining ? "draining" : "live",
                 String(format: "%.1fs", n.leaseAgeSeconds), String(n.sockets), String(n.devices), n.startedAt.iso8601]
            })
            print("\(nodes.filter(\.isLive).count) live node(s), \(split) device(s) split across nodes")
        }
    }
}
