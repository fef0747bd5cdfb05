import RelayCore
import RelayStore
import Synchronization

/// Writes the robots' last-known state behind the forwarding path (docs/protocol.md v1.2): the
/// service thread hands it the changed devices once a second; a job on the database worker saves
/// them in one statement per batch (no connection of its own). Pending state is kept by device
/// (the newest wins), so a database outage costs no more memory than one entry per changed
/// device, and what could not be written is written on a later tick. At stop, what is pending is
/// written by the worker's last jobs if the database answers.
public final class StateWriter: Sendable {
    private let worker: DatabaseWorker
    private let pending = Locked<[DeviceID: [DeviceHub.KnownEvent]]>([:])
    /// A write is queued or running: at most one at a time.
    private let writing = Atomic<Bool>(false)
    private let statistics = Locked<(batches: Int, devices: Int, failures: Int)>((0, 0, 0))

    public init(worker: DatabaseWorker) {
        self.worker = worker
    }

    /// Queues changed devices and writes what is pending (service thread; never blocks on the
    /// database). Called every second, also with nothing new: a failed batch is tried again.
    public func submit(_ states: [(device: DeviceID, events: [DeviceHub.KnownEvent])]) {
        if !states.isEmpty { pending.withLock { for state in states { $0[state.device] = state.events } } }
        guard !pending.withLock({ $0.isEmpty }), !writing.exchange(true, ordering: .acquiringAndReleasing) else { return }
        let queued = worker.submit({ [self] db in
            defer { writing.store(false, ordering: .releasing) }
            try write(db)
        }, failed: { [self] _ in writing.store(false, ordering: .releasing) })
        if !queued { writing.store(false, ordering: .releasing) }
    }

    /// Devices waiting to be written, batches written, devices written, failed batches.
    public var stats: (queued: Int, batches: Int, devices: Int, failures: Int) {
        let queued = pending.withLock { $0.count }
        let s = statistics.withLock { $0 }
        return (queued, s.batches, s.devices, s.failures)
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
