/// The node's memory budget for missed-event history (`WIMZ_RECOVERY_MEMORY`): every message
/// held by any device's `DeviceHistory` is counted in `used` as it enters and leaves; past
/// `limit` the hub drops the oldest messages of the devices resumed least recently (`order`),
/// so a busy fleet costs at most the budget however many devices it has. A resume that needed a
/// dropped message gets `recovered:false` and the v1 replay, as for any overflow. Service thread.
public struct HistoryMemory {
    /// Bytes the histories may hold together.
    public let limit: Int
    /// Bytes they hold now.
    public internal(set) var used = 0
    /// Messages dropped to stay within `limit`.
    public internal(set) var evictions = 0
    /// Devices with held messages, least recently resumed first.
    var order = LRUTable<DeviceID, DeviceHistory>(capacity: Int.max)

    public init(limit: Int) {
        self.limit = limit
    }

    /// `history` was resumed (or just created): the last to lose messages.
    mutating func resumed(_ device: DeviceID, _ history: DeviceHistory) {
        order.set(device, history)
        history.isListed = true
    }

    /// Drops the oldest messages of the least recently resumed devices until `used` is within
    /// `limit`. Devices left without messages leave the order (an append lists them again).
    mutating func evict() {
        while used > limit {
            order.removeOldest { history in
                guard history.count == 0 else { return false }
                history.isListed = false
                return true
            }
            guard let victim = order.oldestValue else { return }
            victim.dropOldest(used: &used)
            evictions += 1
        }
    }

    /// `history` goes with its device: its bytes are no longer held.
    mutating func release(_ device: DeviceID, _ history: DeviceHistory) {
        history.clear(used: &used)
        if history.isListed { order.remove(device) }
        history.isListed = false
    }

    /// Drops every message older than its history's `maxAge` (idle devices keep nothing).
    mutating func sweep(now: UInt64) {
        order.forEach { _, history in history.dropExpired(now: now, used: &used) }
    }
}
