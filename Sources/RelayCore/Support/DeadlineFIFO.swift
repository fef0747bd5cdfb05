/// Items whose deadlines grow in the order they are added (every deadline is "now + the same
/// delay"), so a FIFO finds the expired ones in O(expired). Used where thousands of sockets wait
/// at once (a reconnect storm's half-read requests, a stop's closes): `lws_set_timeout` would
/// insert each into lws's one sorted timer list, O(waiting) per insertion — O(n²) in all.
public struct DeadlineFIFO<Item> {
    private var entries: [(item: Item, deadline: UInt64)] = []
    private var head = 0

    public init() {}

    public mutating func append(_ item: Item, deadline: UInt64) { entries.append((item, deadline)) }

    /// Removes and returns the items whose deadline is at or before `now`, oldest first.
    public mutating func popExpired(now: UInt64) -> [Item] {
        var expired: [Item] = []
        while head < entries.count, entries[head].deadline <= now {
            expired.append(entries[head].item)
            head += 1
        }
        if head > 1024, head * 2 > entries.count {
            entries.removeFirst(head)
            head = 0
        }
        return expired
    }
}
