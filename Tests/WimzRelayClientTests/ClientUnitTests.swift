import Foundation
import Testing
@testable import WimzRelayClient

@Suite struct ClientUnitTests {
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

    @Test func eventsAreTypedAndUnknownOnesPassThroughRaw() throws {
        func event(_ text: String) throws -> RelayEvent { RelayEvent(message: try JSON(parsing: text), raw: text) }
        #expect(try event(#"{"type":"event","event":"device_status","data":{"device_id":"d","online":true,"since":"2026-11-22T10:00:00Z"}}"#)
            == .deviceStatus(DeviceStatus(deviceID: "d", online: true, since: Date(timeIntervalSince1970: 1_795_341_600))))
        guard case .modeChanged(let mode) = try event(#"{"type":"event","event":"mode_changed","data":{"mode":"training","previous_mode":"idle"}}"#)
        else { Issue.record("not a mode_changed"); return }
        #expect(mode.mode == "training" && mode.previousMode == "idle")
        guard case .treatDispensed(let treat) = try event(#"{"type":"event","event":"treat_dispensed","data":{"count":1,"remaining":"many"}}"#)
        else { Issue.record("not a treat_dispensed"); return }
        #expect(treat.count == 1 && treat.remaining == nil && treat.data["remaining"] == "many")
        let unknownText = #"{"type":"event","event":"battery","data":{"level":0.5}}"#
        #expect(try event(unknownText) == .other(name: "battery", data: ["level": 0.5], raw: unknownText))
        let signalling = #"{"type":"webrtc_answer","sdp":"v=0"}"#
        #expect(try event(signalling) == .message(raw: signalling))
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
