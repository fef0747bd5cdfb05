import Foundation
import Testing
@testable import WimzRelayClient
import WimzProtocol

/// The relay client's pure parts: no relay, no database.
@Suite struct ClientUnitTests {
    /// The client calls the protocol's paths (`WimzProtocol.Path`) under the relay's base URL,
    /// a path prefix included.
    @Test func relayURLsAreTheProtocolsPathsUnderTheBase() {
        let base = URL(string: "https://relay.example/prefix")!
        #expect(relayURL(base, WimzProtocol.Path.device("robot-1", .members, ["7"])).absoluteString
                == "https://relay.example/prefix/api/devices/robot-1/members/7")
        #expect(relayURL(URL(string: "https://relay.example")!, WimzProtocol.Path.turnCredentials).absoluteString
                == "https://relay.example/api/turn/credentials")
    }

    @Test func refusalsCarryTheRelaysErrorCodeTyped() {
        let refusal = RelayClientError.refusal(status: 403, body: Data(#"{"error":"wrong_device","message":"token belongs to another device"}"#.utf8))
        #expect(refusal.errorCode == .wrongDevice)
        #expect(RelayClientError.refusal(status: 409, body: Data(#"{"error":"last_owner","message":"x"}"#.utf8)).errorCode == .lastOwner)
        #expect(RelayClientError.refusal(status: 500, body: Data(#"{"error":"robot_own_code"}"#.utf8)).errorCode == nil)
        #expect(RelayClientError.robotBusy(message: "").errorCode == .robotBusy && RelayClientError.timeout.errorCode == nil)
    }

    /// Whole numbers stay exact past 2^53 (they were `Double`s), others are `Double`s; the two
    /// compare and hash by value.
    @Test func jsonNumbersKeepIntegersExact() throws {
        let parsed = try JSON(parsing: #"{"id":9007199254740993,"ratio":1.5,"n":-3,"huge":1e300}"#)
        #expect(parsed["id"] == .integer(9_007_199_254_740_993) && parsed["id"]?.int64Value == 9_007_199_254_740_993)
        #expect(parsed.text.contains(#""id":9007199254740993"#))
        #expect(parsed["ratio"] == .number(1.5) && parsed["ratio"]?.intValue == nil && parsed["n"]?.intValue == -3)
        #expect(parsed["huge"]?.doubleValue == 1e300 && parsed["huge"]?.int64Value == nil)
        #expect(JSON.integer(1) == .number(1.0) && Set<JSON>([.integer(1), .number(1.0)]).count == 1)
        #expect(JSON.integer(1) != .number(1.5) && JSON.integer(1) != .string("1"))
        struct Big: Decodable { var id: Int64; var ratio: Double; var n: Int }
        let big = try parsed.decode(Big.self)
        #expect(big.id == 9_007_199_254_740_993 && big.ratio == 1.5 && big.n == -3)
    }

    @Test func backoffIsCappedFullJitterAndSlowerWhenAsked() {
        var backoff = Backoff(base: .milliseconds(500), cap: .seconds(8), slowFloor: .seconds(5), slowCap: .seconds(60))
        var rng = SystemRandomNumberGenerator()
        let delays = (0..<40).map { _ in backoff.nextDelay(using: &rng) }
        #expect(delays.allSatisfy { $0 >= .zero && $0 <= .seconds(8) })
        #expect(delays[0] <= .milliseconds(500) && delays[1] <= .seconds(1))
        #expect(Set(delays).count > 30, "jittered, not lock-step")
        let slow = (0..<20).map { _ in backoff.nextDelay(slow: true, using: &rng) }
        #expect(slow.allSatisfy { $0 >= .seconds(5) && $0 <= .seconds(60) })
        backoff.reset()
        #expect(backoff.nextDelay(using: &rng) <= .milliseconds(500))
    }

    @Test func aPushsUserInfoDecodesIntoAResumablePushNotification() throws {
        let body = #"{"aps":{"alert":{"loc-key":"WIMZ_BARK_DETECTED","loc-args":["Rex"]},"sound":"default","thread-id":"d1","mutable-content":1},"wimz":{"device_id":"d1","event":"bark_detected","count":5,"epoch":"abc","seq":42}}"#
        // userInfo as iOS hands it over: Foundation objects from the JSON.
        let userInfo = try #require(try JSONSerialization.jsonObject(with: Data(body.utf8)) as? [AnyHashable: Any])
        let push = try #require(PushNotification(userInfo: userInfo))
        #expect(push.kind == .barkDetected && push.deviceID == "d1" && push.count == 5 && push.epoch == "abc" && push.seq == 42)
        #expect(push.resumePoint(lastSeen: 30) == ResumePoint(epoch: "abc", seq: 30))
        #expect(push.resumePoint(lastSeen: nil) == ResumePoint(epoch: "abc", seq: 0))
        let offline = try #require(PushNotification(userInfo: ["wimz": ["device_id": "d1", "event": "robot_offline", "count": 1]]))
        #expect(offline.kind == .robotOffline && offline.epoch == nil && offline.resumePoint(lastSeen: 3) == nil)
        #expect(PushNotification(userInfo: ["aps": [:]]) == nil && PushNotification(userInfo: ["wimz": ["event": "fire"]]) == nil)
        #expect(Data([0x0a, 0xff, 0x00]).hexString == "0aff00")
    }

    @Test func eventsKeepTheirNameDataAndTextAndOtherMessagesPassThroughRaw() throws {
        #expect(try RelayEvent(text: #"{"type":"event","event":"device_status","data":{"device_id":"d","online":true,"since":"2026-11-22T10:00:00Z"}}"#)
            == .deviceStatus(DeviceStatus(deviceID: "d", online: true, since: Date(timeIntervalSince1970: 1_795_341_600))))
        #expect(try RelayEvent(text: #"{"type":"event","event":"device_status","data":{"device_id":"d","online":false,"since":"2026-11-22T10:00:00.250Z"}}"#)
            == .deviceStatus(DeviceStatus(deviceID: "d", online: false, since: Date(timeIntervalSince1970: 1_795_341_600.25))))
        let battery = #"{"type":"event","event":"battery","data":{"level":0.5},"timestamp":"t"}"#
        #expect(try RelayEvent(text: battery) == .event(EventMessage(name: "battery", data: ["level": 0.5], timestamp: "t", raw: battery)))
        let signalling = #"{"type":"webrtc_answer","sdp":"v=0"}"#
        #expect(try RelayEvent(text: signalling) == .message(raw: signalling))
    }

    @Test func theLastKnownStateKeepsEachEventAsReceived() throws {
        let body = #"{"device_id":"d","online":false,"last_seen":"2026-11-22T10:00:00Z","events":{"mode_changed":{"message":{"type":"event","event":"mode_changed","data":{"mode":"coach"}},"received_at":"2026-11-22T09:59:00Z"},"bogus":{"message":"not an object"}}}"#
        let state = try LastKnownState.decode(Data(body.utf8))
        #expect(state.deviceID == "d" && !state.online && state.lastSeen == Date(timeIntervalSince1970: 1_795_341_600))
        #expect(state.events["mode_changed"]?.message.data == ["mode": "coach"])
        #expect(state.events["mode_changed"]?.receivedAt == Date(timeIntervalSince1970: 1_795_341_540))
        #expect(state.events["bogus"] == nil)
        #expect(throws: RelayClientError.self) { try LastKnownState.decode(Data(#"{"online":true}"#.utf8)) }
    }

    @Test func urlsKeepThePathPrefixAndNeverCarryTheToken() {
        let client = RelayClient(.init(url: URL(string: "https://api.wimzai.com/relay/")!, deviceID: "robot-42", token: "wimz_a_secret"))
        #expect(client.socketURL.absoluteString == "wss://api.wimzai.com/relay/ws/app?device_id=robot-42")
        #expect(client.httpBase.absoluteString == "https://api.wimzai.com/relay")
    }

    @Test func turnCredentialsDecodeTheEndpointBody() throws {
        let body = #"{"urls":["turn:t:3478?transport=udp"],"username":"1795400000:d.app","credential":"c2VjcmV0","ttl":600,"expires_at":"2026-11-23T02:13:20Z","refresh_at":"2026-11-23T02:08:20Z","ice_servers":[{"urls":["stun:t:3478"]},{"urls":["turn:t:3478?transport=udp"],"username":"1795400000:d.app","credential":"c2VjcmV0"}]}"#
        let credentials = try TurnCredentials.decode(Data(body.utf8))
        #expect(credentials.expiresAt == Date(timeIntervalSince1970: 1_795_400_000))
        #expect(credentials.iceServers.map(\.urls) == [["stun:t:3478"], ["turn:t:3478?transport=udp"]])
        #expect(credentials.iceServers[0].username == nil && credentials.iceServers[1].credential == "c2VjcmV0")
        #expect(!credentials.isFresh(at: Date(timeIntervalSince1970: 1_795_400_000 - 299)))
    }
}

/// `JSON.decode`: a parsed message typed from its tree agrees with `JSONDecoder` reading the text.
@Suite struct JSONTreeDecoderTests {
    /// Collects the keys a decoder presents, converted.
    struct Keys: Decodable, Equatable {
        struct AnyKey: CodingKey {
            var stringValue: String
            var intValue: Int? { nil }
            init(stringValue: String) { self.stringValue = stringValue }
            init?(intValue: Int) { nil }
        }
        let names: Set<String>
        init(from decoder: any Decoder) throws { names = Set(try decoder.container(keyedBy: AnyKey.self).allKeys.map(\.stringValue)) }
    }

    struct Sample: Codable, Equatable {
        struct Stage: Codable, Equatable { var stageNumber: Int; var label: String? }
        var dogName: String?
        var totalStages: Int
        var targetSec: Double
        var locked: Bool
        var stages: [Stage]
        var tags: [String]?
        var ratio: Float?
        var smallCount: UInt8?
        var extra: JSON?
    }

    private func both<T: Decodable & Equatable>(_ type: T.Type, _ text: String) throws -> (tree: T?, foundation: T?) {
        let decoder = JSONDecoder()
        decoder.keyDecodingStrategy = .convertFromSnakeCase
        return (try? JSON(parsing: text).decode(type, snakeCaseKeys: true), try? decoder.decode(type, from: Data(text.utf8)))
    }

    @Test func keysConvertAsJSONDecodersSnakeCaseStrategy() throws {
        let keys = ["dog_name", "_leading", "trailing_", "__both__ends__", "a__b", "dog_ID", "already", "HTTP_status", "x_1y", "_", "", "ünï_côde"]
        let text = "{" + keys.map { "\"\($0)\":0" }.joined(separator: ",") + "}"
        let result = try both(Keys.self, text)
        #expect(result.tree != nil && result.tree == result.foundation)
    }

    @Test func valuesDecodeAndFailAsWithJSONDecoder() throws {
        let good = #"{"dog_name":"Elsa","total_stages":5,"target_sec":5,"locked":true,"stages":[{"stage_number":1},{"stage_number":2,"label":"sit"}],"ratio":0.5,"small_count":200,"extra":{"a":[1,"b",null]}}"#
        let decoded = try both(Sample.self, good)
        #expect(decoded.tree != nil && decoded.tree == decoded.foundation)
        for bad in [#"{"total_stages":5.5,"target_sec":1,"locked":true,"stages":[]}"#,
                    #"{"total_stages":5,"target_sec":1,"locked":"yes","stages":[]}"#,
                    #"{"total_stages":5,"target_sec":1,"locked":true,"stages":[],"small_count":300}"#,
                    #"{"total_stages":5,"target_sec":1,"locked":true}"#,
                    #"{"total_stages":5,"target_sec":1,"locked":true,"stages":{}}"#] {
            let result = try both(Sample.self, bad)
            #expect(result.tree == nil && result.foundation == nil, "\(bad)")
        }
    }
}
