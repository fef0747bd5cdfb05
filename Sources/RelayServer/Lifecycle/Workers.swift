import Logging
import RelayCore
import RelayPush
import RelayStore
import RelayWorkers

/// Every thread the relay runs beside the service thread, built here and nowhere else: the four
/// database connections' (docs/operations.md: `store_monitor`, `database_worker`, `audit_writer`,
/// `cluster_agent`), the two that borrow the worker's, and the push sender. The components are
/// handed the ones they use; `RelayServer.lifecycle` starts and stops them all, in one order.
final class Workers {
    /// What the service thread asks the store monitor about tokens.
    let credentials = CredentialQueue()
    /// The devices whose registrations the service thread holds, read and followed by the store monitor.
    let followedDevices = FollowedDevices()
    let audit: AuditWriter
    let database: DatabaseWorker
    let monitor: StoreMonitor
    let cluster: ClusterAgent
    let turnCutter: TurnSessionCutter
    let retention: RetentionPruner
    /// Nil without an APNs key, or with one that cannot be read (logged; `wimz-relay serve`
    /// checks it before it gets here).
    let push: APNsSender?

    /// Events for the service thread go to `mailbox`; `clock` stamps the audit events the
    /// database worker's jobs write (the relay's, as `AuditTrail`'s).
    init(configuration: RelayConfiguration, identity: ClusterAgent.Identity, migrator: Migrator, mailbox: Mailbox<ServiceEvent>,
         clock: RelayClock) {
        let url = configuration.databaseURL, node = identity.nodeID
        audit = AuditWriter(conninfo: url, node: node, spoolDirectory: configuration.spoolDirectory)
        database = DatabaseWorker(conninfo: url, node: node, clock: clock)
        monitor = StoreMonitor(conninfo: url, node: node, migrator: migrator, turnRealm: configuration.turnRealm,
                               credentials: credentials, devices: followedDevices) { mailbox.post(.store($0)) }
        cluster = ClusterAgent(conninfo: url, identity: identity, leaseSeconds: configuration.clusterLeaseSeconds) {
            mailbox.post(.cluster($0))
        }
        turnCutter = TurnSessionCutter(worker: database, servers: configuration.turnAdminServers,
                                       password: configuration.turnAdminPassword, node: node,
                                       allocationLifetime: configuration.turnMaxAllocationLifetime)
        retention = RetentionPruner(worker: database, policy: .init(configuration))
        push = Workers.pushSender(configuration, mailbox: mailbox)
    }

    private static func pushSender(_ configuration: RelayConfiguration, mailbox: Mailbox<ServiceEvent>) -> APNsSender? {
        guard let keyFile = configuration.apnsKeyFile else { return nil }
        let settings = APNsSettings(keyFile: keyFile,
                                    identity: .init(keyID: configuration.apnsKeyID ?? "", teamID: configuration.apnsTeamID ?? ""),
                                    topic: configuration.apnsTopic ?? "", productionURL: configuration.apnsURL,
                                    sandboxURL: configuration.apnsSandboxURL, caFile: configuration.apnsCAFile)
        do {
            return try APNsSender(settings: settings, onOutcome: { mailbox.post(.push(.outcome($0))) },
                                  onLiveActivityOutcome: { mailbox.post(.liveActivityOutcome($0)) })
        } catch {
            Logger(label: "wimz.push").error("apns_unavailable", metadata: ["reason": "\(error)", "key_file": "\(keyFile)"])
            return nil
        }
    }
}

/// One thing `RelayServer` starts before its loop runs and stops after, in `lifecycle`'s order.
struct LifecycleStep {
    let name: String
    let start: () -> Void
    let stop: () -> Void

    init(_ name: String, start: @escaping () -> Void = {}, stop: @escaping () -> Void) {
        self.name = name
        self.start = start
        self.stop = stop
    }
}
