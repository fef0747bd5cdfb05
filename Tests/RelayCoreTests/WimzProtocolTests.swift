import Foundation
import Testing
import WimzProtocol

/// The shared protocol constants: every close code has its reconnect meaning, and the JSON other
/// clients check against parses and says the same.
@Suite struct WimzProtocolTests {
    @Test func closeCodesSayHowToReconnect() {
        #expect(CloseCode.reconnect(after: 1012) == .atOnce && CloseCode.reconnect(after: 1001) == .atOnce)
        #expect(CloseCode.reconnect(after: 4008) == .slowBackoff && CloseCode.reconnect(after: 4029) == .slowBackoff)
        #expect(CloseCode.reconnect(after: 4003) == .never && CloseCode.reconnect(after: 4001) == .never)
        #expect(CloseCode.reconnect(after: nil) == .backoff && CloseCode.reconnect(after: 1006) == .backoff)
    }

    @Test func theConstantsJSONParsesAndAgrees() throws {
        let json = try #require(try JSONSerialization.jsonObject(with: Data(WimzProtocol.constantsJSON.utf8)) as? [String: Any])
        let codes = try #require(json["close_codes"] as? [String: [String: Any]])
        #expect(codes.count == CloseCode.allCases.count)
        for code in CloseCode.allCases {
            #expect(codes["\(code)"]?["code"] as? Int == Int(code.rawValue))
            #expect(codes["\(code)"]?["reconnect"] as? String == code.reconnect.rawValue)
        }
        #expect(Set(json["replayed_events"] as? [String] ?? []) == WimzProtocol.replayedEvents)
        #expect((json["message_types"] as? [String])?.contains("http_request") == true)
    }
}
