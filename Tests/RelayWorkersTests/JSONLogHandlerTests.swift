import Logging
import RelayCore
import Testing
@testable import RelayLogging

@Suite struct JSONLogHandlerTests {
    private func line(_ level: Logger.Level = .info, _ message: String, _ metadata: Logger.Metadata) -> String {
        String(decoding: JSONLogHandler.line(level: level, message: message, metadata: metadata,
                                             time: UnixTime(microseconds: 1_795_000_000_123_456)), as: UTF8.self)
    }

    @Test func writesOneJSONObjectPerLineWithNumbersKeptAsNumbers() {
        let text = line(.warning, "http_request", ["status": .stringConvertible(404), "path": "/x", "ok": .stringConvertible(false),
                                                   "duration_s": .stringConvertible(0.25), "tags": ["a", "b"]])
        #expect(text == #"{"ts":"2026-11-18T11:06:40.123456Z","level":"warn","event":"http_request","duration_s":0.25,"ok":false,"path":"/x","status":404,"tags":["a","b"]}"# + "\n")
    }

    @Test func levelsKeepTheRelaysFourNames() {
        #expect(Logger.Level.allCases.map(\.lineName) == ["debug", "debug", "info", "info", "warn", "error", "error"])
        #expect(LogLevel.allCases.map(Logger.Level.init) == [.debug, .info, .warning, .error])
        #expect(Logger.Level.allCases.map { Logger.Level(rank: $0.rank) } == Logger.Level.allCases)
        #expect(Logger.Level.allCases.map(\.rank) == Array(0...6))
    }

    @Test func tokensNeverReachALine() {
        let text = line(.info, "ws_upgrade", ["path": "/ws/app?device_id=d1&token=wimz_a_secret", "token": "wimz_r_secret",
                                       "authorization": "Bearer wimz_a_other", "nested": ["uri": "/x?token=abc"]])
        #expect(!text.contains("secret") && !text.contains("other") && !text.contains("abc"))
        #expect(text.contains(#""path":"/ws/app?device_id=d1&token=REDACTED""#))
        #expect(text.contains(#""token":"REDACTED""#) && text.contains(#""authorization":"REDACTED""#))
    }

    @Test func theSinksLevelAppliesToEveryHandler() {
        let sink = LogSink(level: .info)
        var first = JSONLogHandler(sink: sink)
        let second = JSONLogHandler(sink: sink)
        first.logLevel = .error
        #expect(second.logLevel == .error)
        #expect(sink.level == .error)
    }
}
