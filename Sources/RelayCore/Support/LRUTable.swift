/// A table of at most `capacity` entries that, when full, forgets the entry used least
/// recently to make room — never everything at once (an attacker who fills a limiter's table
/// must not reset everyone's limits with it). Lookups and updates are O(1): the entries sit in
/// one array, linked in order of use by index. Service-thread state.
public struct LRUTable<Key: Hashable, Value> {
    fileprivate struct Slot {
        var key: Key
        var value: Value
        var newer: Int
        var older: Int
    }

    public let capacity: Int
    private var slots: [Slot] = []
    private var index: [Key: Int] = [:]
    /// Most and least recently used slots (-1: none).
    private var newest = -1
    private var oldest = -1

    public init(capacity: Int) {
        precondition(capacity > 0)
        self.capacity = capacity
    }

    public var count: Int { index.count }

    /// The value for `key`, marked as just used.
    public mutating func use(_ key: Key) -> Value? {
        guard let k = index[key] else { return nil }
        touch(k)
        return slots[k].value
    }

    /// The value for `key` without marking it used.
    public func peek(_ key: Key) -> Value? { index[key].map { slots[$0].value } }

    /// Sets `key`'s value and marks it as just used; a new key past the capacity takes the
    /// least recently used entry's slot.
    public mutating func set(_ key: Key, _ value: Value) {
        if let k = index[key] {
            slots[k].value = value
            touch(k)
            return
        }
        let k: Int
        if slots.count < capacity {
            k = slots.count
            slots.append(Slot(key: key, value: value, newer: -1, older: -1))
        } else {
            k = oldest
            unlink(k)
            index[slots[k].key] = nil
            slots[k].key = key
            slots[k].value = value
        }
        index[key] = k
        linkNewest(k)
    }

    /// The least recently used entry's value.
    public var oldestValue: Value? { oldest >= 0 ? slots[oldest].value : nil }

    /// Calls `body` with every entry (in no particular order).
    public func forEach(_ body: (Key, Value) -> Void) {
        for slot in slots { body(slot.key, slot.value) }
    }

    /// Removes `key`'s entry.
    public mutating func remove(_ key: Key) {
        guard let k = index[key] else { return }
        removeSlot(k)
    }

    /// Removes the least recently used entries while `stale` says so (oldest first: it stops at
    /// the first entry that is not stale).
    public mutating func removeOldest(while stale: (Value) -> Bool) {
        while oldest >= 0, stale(slots[oldest].value) { removeSlot(oldest) }
    }

    private mutating func removeSlot(_ k: Int) {
        unlink(k)
        index[slots[k].key] = nil
        // Keep the array dense: move the last slot into the hole.
        let last = slots.count - 1
        if k != last {
            slots[k] = slots[last]
            index[slots[k].key] = k
            if slots[k].newer >= 0 { slots[slots[k].newer].older = k } else { newest = k }
            if slots[k].older >= 0 { slots[slots[k].older].newer = k } else { oldest = k }
        }
        slots.removeLast()
    }

    private mutating func touch(_ k: Int) {
        guard k != newest else { return }
        unlink(k)
        linkNewest(k)
    }

    private mutating func unlink(_ k: Int) {
        let (newer, older) = (slots[k].newer, slots[k].older)
        if newer >= 0 { slots[newer].older = older } else { newest = older }
        if older >= 0 { slots[older].newer = newer } else { oldest = newer }
        slots[k].newer = -1
        slots[k].older = -1
    }

    private mutating func linkNewest(_ k: Int) {
        slots[k].older = newest
        slots[k].newer = -1
        if newest >= 0 { slots[newest].newer = k }
        newest = k
        if oldest < 0 { oldest = k }
    }
}

extension LRUTable: Sendable where Key: Sendable, Value: Sendable {}
extension LRUTable.Slot: Sendable where Key: Sendable, Value: Sendable {}
