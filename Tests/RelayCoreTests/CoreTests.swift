import Testing
@testable import RelayCore

@Suite struct DeviceIDTests {
    @Test(arguments: ["a", "device_abc123", "A-Z.a_z-09", String(repeating: "x", count: 64)])
    func accepts(_ text: String) { #expect(DeviceID(text) != nil) }

    @Test(arguments: ["", String(repeating: "x", count: 65), "has space", "semi;colon", "slash/", "ünï", "quote\"",
                      "new\nline", "%41"])
    func rejects(_ text: String) { #expect(DeviceID(text) == nil) }
}

@Suite struct UnixTimeTests {
    @Test func formatsUTC() {
        #expect(UnixTime(seconds: 0).iso8601 == "1970-01-01T00:00:00Z")
        #expect(UnixTime(seconds: 1_795_400_000).iso8601 == "2026-11-23T02:13:20Z")
    }

    @Test(arguments: [("2026-11-23T02:13:20Z", Int64(1_795_400_000_000_000)),
                      ("2026-11-23 02:13:20.5+00", Int64(1_795_400_000_500_000)),
                      ("2026-11-23T04:13:20+02:00", Int64(1_795_400_000_000_000)),
                      ("1970-01-01T00:00:00.000001Z", Int64(1))])
    func parses(_ text: String, _ micros: Int64) {
        #expect(UnixTime(iso8601: text)?.microseconds == micros)
    }

    @Test(arguments: ["", "2026-13-01T00:00:00Z", "2026-11-22T02:13:20", "2026-11-22X02:13:20Z", "yesterday"])
    func rejects(_ text: String) { #expect(UnixTime(iso8601: text) == nil) }
}

@Suite struct JSONValueTests {
    @Test func escapesStrings() {
        let value: JSONValue = .object([("a", "quote\" back\\ nl\n tab\t ctl\u{01}"), ("n", 5), ("b", true), ("z", .null)])
        #expect(value.encoded == #"{"a":"quote\" back\\ nl\n tab\t ctl\u0001","n":5,"b":true,"z":null}"#)
    }

    @Test func rawIsVerbatim() {
        #expect(JSONValue.array([.raw(#"{"x":1}"#), "y"]).encoded == #"[{"x":1},"y"]"#)
    }
}

@Suite struct RedactionTests {
    @Test func redactsTokenQueryValues() {
        #expect(Redaction.redactQuery("/ws/app?device_id=d1&token=wimz_a_secret") == "/ws/app?device_id=d1&token=REDACTED")
        #expect(Redaction.redactQuery("/x?token=a&token=b&k=v") == "/x?token=REDACTED&token=REDACTED&k=v")
        #expect(Redaction.redactQuery("/healthz") == "/healthz")
    }
}

@Suite struct ConfigurationTests {
    @Test func parsesListenAddresses() {
        #expect(RelayConfiguration.parseListen("127.0.0.1:8080")! == ("127.0.0.1", 8080))
        #expect(RelayConfiguration.parseListen("[::1]:0")! == ("::1", 0))
        #expect(RelayConfiguration.parseListen("0.0.0.0:443")! == ("0.0.0.0", 443))
        #expect(RelayConfiguration.parseListen("8080") == nil)
        #expect(RelayConfiguration.parseListen("host:99999") == nil)
        #expect(RelayConfiguration.parseListen(":80") == nil)
    }
}

@Suite struct CredentialRulesTests {
    struct Token: CredentialState {
        var deviceID = DeviceID("d1")!
        var role = Role.app
        var expiresAt: UnixTime? = nil
        var revokedAt: UnixTime? = nil
        var deviceDisabled = false
    }

    let now = UnixTime(seconds: 1000)

    func failure(_ token: Token, device: String = "d1", role: Role = .app) -> AuthFailure? {
        if case .failure(let f) = CredentialRules.authorize(token, device: DeviceID(device)!, role: role, at: now) { return f }
        return nil
    }

    @Test func validTokenPasses() { #expect(failure(Token()) == nil) }
    @Test func otherDeviceIs403() { #expect(failure(Token(), device: "d2") == .wrongDevice); #expect(AuthFailure.wrongDevice.httpStatus == 403) }
    @Test func otherRoleIs403() { #expect(failure(Token(), role: .robot) == .wrongRole) }
    @Test func expiredIs401() {
        #expect(failure(Token(expiresAt: UnixTime(seconds: 1000))) == .expiredToken)
        #expect(failure(Token(expiresAt: UnixTime(seconds: 1001))) == nil)
        #expect(AuthFailure.expiredToken.httpStatus == 401)
    }
    @Test func revokedIs401() { #expect(failure(Token(revokedAt: UnixTime(seconds: 5))) == .revokedToken) }
    @Test func disabledDeviceIs403() { #expect(failure(Token(deviceDisabled: true)) == .deviceDisabled) }
}
