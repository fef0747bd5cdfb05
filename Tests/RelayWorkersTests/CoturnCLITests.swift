import Testing
@testable import RelayWorkers

/// Reading coturn's CLI (the conversation itself runs against a real coturn in
/// Tests/Cluster/test_household.py).
@Suite struct CoturnCLITests {
    /// A `ps` listing as coturn 4.6.1 prints it.
    static let listing = "\r\n    1) id=001000000000000002, user <1795400000:robot-42/17>:\r\n      realm: wimz\r\n"
        + "      started 3 secs ago\r\n      client protocol UDP, relay protocol UDP\r\n\r\n"
        + "    2) id=001000000000000003, user <1795400000:robot-42/17>:\r\n      realm: wimz\r\n\r\n"
        + "    3) id=001000000000000004, user <1795400000:robot-42/170>:\r\n\r\n  Total sessions: 3\r\n\r\n> "

    @Test func onlyTheExactUsernamesSessionsAreTaken() {
        #expect(CoturnCLI.sessionIDs(in: Self.listing, username: "1795400000:robot-42/17") == ["001000000000000002", "001000000000000003"])
        #expect(CoturnCLI.sessionIDs(in: Self.listing, username: "1795400000:robot-42/1") == [])
        #expect(CoturnCLI.sessionIDs(in: "\r\n  Total sessions: 0\r\n\r\n> ", username: "x") == [])
    }

    @Test func usernamesThatCouldBreakTheCommandLineAreNotSent() {
        #expect(CoturnCLI.isSafe("1795400000:robot-42/17"))
        for bad in ["", "a b", "a\r\ncs 1", "naïve", String(repeating: "a", count: 600)] { #expect(!CoturnCLI.isSafe(bad)) }
    }
}
