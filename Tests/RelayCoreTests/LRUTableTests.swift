import Testing
@testable import RelayCore

@Suite struct LRUTableTests {
    @Test func aFullTableForgetsTheLeastRecentlyUsedEntryOnly() {
        var table = LRUTable<String, Int>(capacity: 3)
        table.set("a", 1)
        table.set("b", 2)
        table.set("c", 3)
        _ = table.use("a")  // b is now the least recently used
        table.set("d", 4)
        #expect(table.peek("b") == nil)
        #expect(table.peek("a") == 1 && table.peek("c") == 3 && table.peek("d") == 4 && table.count == 3)
        table.set("c", 30)  // an update counts as a use
        table.set("e", 5)
        #expect(table.peek("a") == nil && table.peek("c") == 30 && table.peek("d") == 4 && table.peek("e") == 5)
    }

    @Test func removingStaleEntriesStopsAtTheFirstFreshOne() {
        var table = LRUTable<Int, UInt64>(capacity: 10)
        for k in 0..<6 { table.set(k, UInt64(k)) }
        table.removeOldest { $0 < 3 }
        let kept = (3..<6).map { table.peek($0) }
        #expect(table.count == 3 && kept == [3, 4, 5])
        // The table stays consistent after removals: fill past capacity again.
        for k in 10..<20 { table.set(k, UInt64(k)) }
        #expect(table.count == 10 && table.peek(3) == nil && table.peek(19) == 19)
    }

    @Test func aLimiterFilledByAnAttackerKeepsItsOtherBuckets() {
        var limiter = KeyedRateLimiter<Int64>(rate: 1, burst: 2, capacity: 100)
        let first = [limiter.allow(1, now: 0), limiter.allow(1, now: 0), limiter.allow(1, now: 0)]
        #expect(first == [true, true, false])
        // Many new keys, but key 1 stays in use: its empty bucket is never forgotten.
        for key in Int64(2)..<1_000 {
            _ = limiter.allow(key, now: 0)
            if key % 50 == 0 {
                let allowed = limiter.allow(1, now: 0)
                #expect(!allowed)
            }
        }
        let last = limiter.allow(1, now: 0)
        #expect(limiter.count == 100 && !last)
    }

    @Test func addressesCountPerIPv4AddressAndPerIPv6Slash64() {
        #expect(AddressKey.of("203.0.113.7") == "203.0.113.7")
        #expect(AddressKey.of("2001:db8:1:2:aaaa::1") == AddressKey.of("2001:db8:1:2:ffff:ffff:ffff:ffff"))
        #expect(AddressKey.of("2001:db8:1:2::1") != AddressKey.of("2001:db8:1:3::1"))
        #expect(AddressKey.of("::ffff:198.51.100.9") == "198.51.100.9")
        #expect(AddressKey.of("not an address") == "not an address")
    }
}
