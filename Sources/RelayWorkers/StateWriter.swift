import Logging
import RelayCore
import RelayStore

/// Writes the robots' last-known state behind the forwarding path (docs/protocol.md v1.2): the
/// service thread hands it the changed devices once a second; this thread saves them in one
/// statement per batch. Pending state is kept by device (the newest wins), so a database outage
/// costs no more memory than one entry per changed device, and what could not be written is
/// written after the reconnect. At stop, what is pending is written if the database answers.
public final class StateWriter: DatabaseWork {
    private let pending = Locked<[DeviceID: [DeviceHub.KnownEvent]]>([:])
    private let statistics = Locked<(batches: Int, devices: Int, failures: Int)>((0, 0, 0))
    private let thread: DatabaseThread
    private let log = Logger(label: "wimz.state")

    public init(conninfo: String) {
        thread = DatabaseThread(name: "state_writer", conninfo: conninfo)
    }

    public func start() { thread.start(self) }

    /// Writes what is pending (when the database answers) and joins the thread.
    public func stop() { thread.stop() }

    /// Queues changed devices (service thread; never blocks on the database).
    public func submit(_ states: [(device: DeviceID, events: [DeviceHub.KnownEvent])]) {
        guard !states.isEmpty else { return }
        pending.withLock { for state in states { $0[state.device] = state.events } }
        thread.wake()
    }

    /// Devices waiting to be written, batches written, devices written, failed batches.
    public var stats: (queued: Int, batches: Int, devices: Int, failures: Int) {
        let queued = pending.withLock { $0.count }
        let s = statistics.withLock { $0 }
        return (queued, s.batches, s.devices, s.failures)
    }

    // MARK: DatabaseWork

    public var channels: [String] { [] }

    public func connected(_ db: PGConnection) throws {}

    public func step(_ db: PGConnection, on thread: DatabaseThread) throws {
        if pending.withLock({ $0.isEmpty }) { thread.wait(milliseconds: 1000) }
        try write(db)
    }

    public func unavailable(_ error: Error) {}

    public func finish(_ db: PGConnection?) {
        guard let db else { return }
        do { try write(db) } catch { log.warning("state_not_written_at_stop", metadata: ["reason": "\(error)"]) }
    }

    private func write(_ db: PGConnection) throws {
        let batch = pending.withLock { p -> [DeviceID: [DeviceHub.KnownEvent]] in defer { p.removeAll() }; return p }
        guard !batch.isEmpty else { return }
        do {
            try StateRepository(db).save(batch.map { ($0.key, $0.value) })
            statistics.withLock { $0.batches += 1; $0.devices += batch.count }
        } catch {
            // Back into the queue unless something newer arrived meanwhile.
            pending.withLock { p in for (device, events) in batch where p[device] == nil { p[device] = events } }
            statistics.withLock { $0.failures += 1 }
            throw error
        }
    }
}
