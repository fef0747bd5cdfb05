import Testing
@testable import RelayCore

@Suite struct TurnPolicyTests {
    let policy = TurnPolicy(urls: ["turns:t.example.com:5349?transport=tcp", "turn:t.example.com:3478?transport=tcp",
                                   "turn:t.example.com:3478?transport=udp"],
                            defaultTTL: 86400, minTTL: 300, maxTTL: 172_800, separator: ":")

    @Test func udpComesFirstOtherwiseOrderKept() {
        #expect(policy.urls == ["turn:t.example.com:3478?transport=udp", "turns:t.example.com:5349?transport=tcp",
                                "turn:t.example.com:3478?transport=tcp"])
        #expect(policy.stunURLs == ["stun:t.example.com:3478"])
    }

    @Test(arguments: [(nil, 86400), ("600", 600), ("10", 300), ("999999", 172_800), ("abc", 86400), ("-5", 300)])
    func clampsTTL(_ requested: String?, _ expected: Int) {
        #expect(policy.clampTTL(requested) == expected)
    }

    @Test func usernameAndTimes() {
        let times = policy.times(issuedAt: UnixTime(microseconds: 1_795_400_000_700_000), ttl: 86400)
        #expect(times.expiresAt.seconds == 1_795_486_400)
        #expect(times.refreshAt.seconds == 1_795_443_200)
        let user = policy.userID(device: DeviceID("device_abc123")!, role: .robot, tokenID: 3)
        #expect(user == "device_abc123.robot")
        #expect(policy.username(userID: user, times: times) == "1795486400:device_abc123.robot")
        let other = TurnPolicy(urls: [], defaultTTL: 1, minTTL: 1, maxTTL: 1, separator: "|")
        #expect(other.username(userID: "u", times: times) == "1795486400|u")
        #expect(policy.userID(device: DeviceID("d")!, role: .app, tokenID: 17) == "d/17")
        #expect(policy.userID(device: DeviceID("d")!, role: .app, tokenID: 17) != policy.userID(device: DeviceID("d")!, role: .robot, tokenID: 17))
    }

    @Test func bodyHasTheContractFields() {
        let times = policy.times(issuedAt: UnixTime(seconds: 1_795_400_000), ttl: 86400)
        let body = policy.body(username: "u", credential: "c", times: times).encoded
        #expect(body.hasPrefix(#"{"urls":["turn:t.example.com:3478?transport=udp""#))
        #expect(body.contains(#""ttl":86400,"expires_at":"2026-11-24T02:13:20Z","refresh_at":"2026-11-23T14:13:20Z""#))
        #expect(body.contains(#""ice_servers":[{"urls":["stun:t.example.com:3478"]},{"urls":["#))
        #expect(body.hasSuffix(#""username":"u","credential":"c"}]}"#))
    }
}
