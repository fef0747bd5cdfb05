import Foundation
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
        #expect(UnixTime(microseconds: 1_795_400_000_000_042).iso8601Microseconds == "2026-11-23T02:13:20.000042Z")
        #expect(UnixTime(microseconds: -1).iso8601Microseconds == "1969-12-31T23:59:59.999999Z")
        #expect(UnixTime(microseconds: 1_795_400_000_123_987).iso8601Milliseconds == "2026-11-23T02:13:20.123Z")
        #expect(UnixTime(microseconds: -1).iso8601Milliseconds == "1969-12-31T23:59:59.999Z")
        #expect(UnixTime(seconds: 951_782_400).iso8601 == "2000-02-29T00:00:00Z")
    }

    /// The quoted form written into a message is the string form between quotes, appended.
    @Test func quotedFormAppendsTheStringForm() {
        for seconds: Int64 in [0, 951_782_400, 1_795_400_000, -1, 4_102_444_799] {
            var out = Array("x:".utf8)
            UnixTime(seconds: seconds).appendQuotedISO8601(to: &out)
            #expect(String(decoding: out, as: UTF8.self) == "x:\"\(UnixTime(seconds: seconds).iso8601)\"")
        }
    }

    /// The arithmetic formatter agrees with the C library's `gmtime_r` across leap years and centuries.
    @Test func formattingMatchesGmtime() {
        var seconds: Int64 = -2_208_988_800  // 1900-01-01
        while seconds < 4_102_444_800 {  // 2100-01-01
            var t = time_t(seconds)
            var parts = tm()
            gmtime_r(&t, &parts)
            let expected = String(format: "%04d-%02d-%02dT%02d:%02d:%02dZ", parts.tm_year + 1900, parts.tm_mon + 1,
                                  parts.tm_mday, parts.tm_hour, parts.tm_min, parts.tm_sec)
            #expect(UnixTime(seconds: seconds).iso8601 == expected)
            #expect(UnixTime(iso8601: expected)?.seconds == seconds)
            seconds += 86_400 * 13 + 3_607  // walks every month and time of day
        }
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

    /// Non-ASCII passes through as UTF-8; the line and paragraph separators are escaped; the
    /// output parses back to the same strings.
    @Test func unicodeAndRoundTrip() throws {
        let text = "dög 🐕 \u{2028}x\u{2029} é\u{1F}"
        let encoded = JSONValue.object([("k", .string(text))]).encoded
        #expect(encoded == "{\"k\":\"dög 🐕 \\u2028x\\u2029 é\\u001f\"}")
        let parsed = try JSONSerialization.jsonObject(with: Data(encoded.utf8)) as? [String: String]
        #expect(parsed?["k"] == text)
    }

    @Test func rawIsVerbatim() {
        #expect(JSONValue.array([.raw(#"{"x":1}"#), "y"]).encoded == #"[{"x":1},"y"]"#)
    }

    /// Numbers are written as digits without a String in between: each must read exactly as
    /// `String(value)` spells it (the whole-thousandths fast path for doubles included).
    @Test func numbersAreSpelledAsStringSpellsThem() {
        var generator = SystemRandomNumberGenerator()
        var integers: [Int64] = [0, 1, -1, 9, 10, -10, 99, 100, .max, .min, .max - 1, .min + 1]
        var doubles: [Double] = [0, -0.0, 0.001, 0.0001, 0.5, 1, 12, 12.3, 12.34, 12.345, 12.005, 12.05, 1e-5, 1e11, 999_999_999_999.999,
                                 1e12, 1e15, 1e16, 1e300, -2.5, .pi, .infinity, -.infinity, .nan, .leastNonzeroMagnitude, .greatestFiniteMagnitude]
        for _ in 0..<20_000 {
            integers.append(Int64.random(in: .min ... .max, using: &generator) >> Int64.random(in: 0...63, using: &generator))
            doubles.append(Double(Int64.random(in: 0...1_000_000_000_000_000, using: &generator)) / 1000)  // thousandths
            doubles.append(Double(Int64.random(in: 0...100_000_000, using: &generator)) / 1000)
            doubles.append(Double(bitPattern: UInt64.random(in: .min ... .max, using: &generator)))
        }
        for value in integers {
            #expect(JSONValue.int(value).encoded == String(value), "\(value)")
        }
        for value in [UInt64.max, UInt64(Int64.max) + 1, 0, 7] {
            var out: [UInt8] = []
            JSONValue.appendDecimal(value, to: &out)
            #expect(String(decoding: out, as: UTF8.self) == String(value))
        }
        for value in doubles {
            #expect(JSONValue.double(value).encoded == (value.isFinite ? String(value) : "null"), "\(value.bitPattern)")
        }
    }
}

@Suite struct RedactionTests {
    @Test func redactsTokenQueryValues() {
        #expect(Redaction.redactQuery("/ws/app?device_id=d1&token=wimz_a_secret") == "/ws/app?device_id=d1&token=REDACTED")
        #expect(Redaction.redactQuery("/x?token=a&token=b&k=v") == "/x?token=REDACTED&token=REDACTED&k=v")
        #expect(Redaction.redactQuery("/healthz") == "/healthz")
        #expect(Redaction.redactQuery("/ws/app?token=") == "/ws/app?token=REDACTED")
        #expect(Redaction.redactQuery("/ü?token=sécret#x&a=é") == "/ü?token=REDACTED&a=é")
    }

    /// The scheme in any case, spaces around the token skipped; anything else is no bearer token.
    @Test func bearerTokenOfAnAuthorizationValue() {
        for (value, token) in [("Bearer abc", "abc"), ("bearer  abc", "abc"), ("BeArEr wimz_a_x y", "wimz_a_x y"),
                               (" Bearer abc", "abc")] {
            #expect(Redaction.bearerToken(fromAuthorization: value) == token, "\(value)")
        }
        for value in ["Basic abc", "Bearer", "Bearer ", "Bearerx abc", "Bear abc", "", "Bearer\tabc", "Bëarer abc"] {
            #expect(Redaction.bearerToken(fromAuthorization: value) == nil, "\(value)")
        }
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
