import Logging
import RelayCore
import RelayStore
import RelayWorkers

/// What every component of the relay shares, built once by `RelayServer`: the configuration, the
/// clock, the counters, the log, the audit trail and the service-thread check. (The device hub
/// is not here: `RelayComponents` hands it to the components that work with it.) Service thread
/// only, like everything it holds.
final class RelayEnvironment {
    let configuration: RelayConfiguration
    let clock: RelayClock
    let thread: ServiceThread
    let audit: AuditTrail
    let log = Logger(label: "wimz.relay")
    /// Counters for /metrics: plain fields, bumped on the forwarding path (see `RelayCounters` for
    /// why), copied into `metrics`' registry at scrape time.
    var counters = RelayCounters()
    /// The Prometheus registry and the histograms observed into it.
    let metrics = RelayMetrics()

    init(configuration: RelayConfiguration, clock: RelayClock, thread: ServiceThread, audit: AuditTrail) {
        self.configuration = configuration
        self.clock = clock
        self.thread = thread
        self.audit = audit
    }

    /// The hub replaced a robot by a newer connection (4001): counted and audited.
    func robotReplaced(_ old: Session, by new: Session) {
        counters.robotsReplaced += 1
        audit.record(.robotReplaced, device: new.deviceID.rawValue, tokenID: new.tokenID, address: new.remoteAddress,
                     details: [("old_connection", .int(Int64(old.id))), ("new_connection", .int(Int64(new.id))),
                               ("old_address", .string(old.remoteAddress))])
    }

    /// The request log line: method, path without the token's value, status, peer, duration.
    func logRequest(method: String, path: String, remote: String, status: Int, startedAt: UInt64) {
        guard log.logLevel <= .info else { return }
        log.info("http_request", metadata: ["method": "\(method)", "path": "\(Redaction.redactQuery(path))",
                                            "status": .stringConvertible(status), "remote": "\(remote)",
                                            "duration_us": .stringConvertible((clock.monotonic() - startedAt) / 1000)])
    }

    func logRequest(_ request: HTTPRequest, status: Int, startedAt: UInt64) {
        logRequest(method: request.head.method, path: request.head.path, remote: request.peerAddress, status: status,
                   startedAt: startedAt)
    }
}

/// The relay's audit events, queued to the audit writer (written in batches on its thread);
/// each names the node that saw it and is stamped with the relay's clock.
struct AuditTrail {
    let writer: AuditWriter
    let node: String
    let clock: RelayClock

    /// A new event at the relay's time; nil when it cannot be made (no randomness for its id),
    /// which is logged and counted (`wimz_audit_unmade_total`), never dropped silently.
    func event(_ kind: AuditKind, device: String?, tokenID: Int64?, address: String?, details: JSONValue) -> AuditEvent? {
        do {
            return try AuditRepository.event(kind, at: clock.wall(), actor: "relay", deviceID: device, tokenID: tokenID,
                                             remoteAddress: address, details: details)
        } catch {
            writer.unmade(kind, error)
            return nil
        }
    }

    func record(_ kind: AuditKind, device: String?, tokenID: Int64?, address: String?,
                details: [(StaticString, JSONValue)] = []) {
        // The details written as the JSON they are stored as, the node last: one buffer, where a
        // tree with the node appended cost two arrays here and its encoding on the writer's
        // thread (these run per connection). Keys are literals: copied, never escaped.
        var text: [UInt8] = []
        text.reserveCapacity(224)
        text.append(UInt8(ascii: "{"))
        for (key, value) in details {
            appendKey(key, to: &text)
            value.encode(into: &text)
            text.append(UInt8(ascii: ","))
        }
        appendKey("node", to: &text)
        JSONValue.appendQuoted(node, to: &text)
        text.append(UInt8(ascii: "}"))
        guard let event = event(kind, device: device, tokenID: tokenID, address: address,
                                details: .raw(String(decoding: text, as: UTF8.self))) else { return }
        writer.record(event)
    }

    /// `"key":` for a key that needs no escaping (the audit details' own names).
    private func appendKey(_ key: StaticString, to text: inout [UInt8]) {
        text.append(UInt8(ascii: "\""))
        JSONValue.appendLiteral(key, to: &text)
        JSONValue.appendLiteral("\":", to: &text)
    }
}

extension DeviceHub.Limits {
    /// The hub's limits as configured.
    init(_ configuration: RelayConfiguration) {
        self.init()
        maxAppsPerDevice = configuration.maxAppsPerDevice
        appRate = configuration.appRateLimitPerSecond
        appBurst = configuration.appRateLimitBurst
        replayEvents = configuration.replayEvents
        pushKinds = Set(PushKind.allCases.filter { $0.robotEvent != nil })
        history.maxMessages = configuration.recoveryMessages
        history.maxAge = UInt64(configuration.recoverySeconds * 1e9)
        historyMemory = configuration.recoveryMemoryBytes
    }
}
