import Testing
@testable import RelayCore

/// The robot's settings in RelayCore (docs/protocol.md v1.6): what an `If-Match` and a document
/// may be, and that a robot's `settings_applied` goes to the relay, never to the apps — on a
/// sealed device too.
@Suite struct SettingsRulesTests {
    var base = DeviceHubTests()

    @Test func ifMatchIsOneQuotedWholeNumber() {
        #expect(SettingsRules.precondition(nil) == .missing)
        #expect(SettingsRules.precondition(#""0""#) == .version(0))
        #expect(SettingsRules.precondition(#""42""#) == .version(42))
        #expect(SettingsRules.precondition(#""999999999999999999""#) == .version(999_999_999_999_999_999))
        for malformed in ["0", #""""#, #""01""#, #""-1""#, #"W/"1""#, #""1", "2""#, "*", #""1x""#, #""1234567890123456789""#] {
            #expect(SettingsRules.precondition(malformed) == .malformed, "\(malformed)")
        }
    }

    @Test func aDocumentIsOneJSONObjectOfAtMost16KiB() throws {
        func refusal(_ document: [UInt8], sealedDevice: Bool?) -> ErrorCode? {
            do { try SettingsRules.checked(document: document, sealedDevice: sealedDevice) } catch { return error.code }
            return nil
        }
        #expect(try SettingsRules.checked(document: Array(#"{"volume": 0.50}"#.utf8), sealedDevice: false)
            == .init(text: #"{"volume": 0.50}"#, isSealedFrame: false))
        for bad in ["[1]", #""x""#, "{", #"{"a":1} {}"#, ""] {
            #expect(refusal(Array(bad.utf8), sealedDevice: nil) == .invalidSettings, "\(bad)")
        }
        let large = Array((#"{"pad":""# + String(repeating: "x", count: SettingsRules.maxDocumentBytes) + #""}"#).utf8)
        #expect(refusal(large, sealedDevice: nil) == .tooLarge)
        let sealed = Array(#"{"type":"sealed","kind":"settings","ct":"x"}"#.utf8)
        #expect(try SettingsRules.checked(document: sealed, sealedDevice: true).isSealedFrame)
        #expect(try SettingsRules.checked(document: sealed, sealedDevice: nil).isSealedFrame)
        #expect(refusal(Array(#"{"type":"sealed","kind":"bark_detected"}"#.utf8), sealedDevice: true) == .sealedDevice)
        #expect(refusal(Array(#"{"volume":1}"#.utf8), sealedDevice: true) == .sealedDevice)
    }

    @Test func aMembersValueIsFoundAsSent() {
        let frame = Array(#"{"type":"settings_applied", "doc" : {"a":[1,{"b":"}"}]} ,"version":7}"#.utf8)
        let text = { (range: Range<Int>?) in range.map { String(decoding: frame[$0], as: UTF8.self) } }
        frame.withUnsafeBufferPointer { bytes in
            #expect(text(Envelope.memberValue("doc", in: bytes)) == #"{"a":[1,{"b":"}"}]}"#)
            #expect(text(Envelope.memberValue("version", in: bytes)) == "7")
            #expect(Envelope.memberValue("missing", in: bytes) == nil)
        }
        #expect(Envelope.scan(frame).kind == .settingsApplied)
    }

    @Test mutating func aRobotsReportGoesToTheRelayNeverToTheApps() {
        let (h, robot, app) = base.connectedPair()
        let reports = SettingsRecorder()
        h.observer = reports
        let applied = #"{"type":"settings_applied","version":1,"doc":{}}"#
        h.receive(Payload(Array(applied.utf8)), from: robot, now: 0)
        #expect(reports.frames == [applied] && base.drain(app) == [])
        // A sealed device: its envelope passes as lock_screen does (its document is sealed).
        h.setSealed(DeviceID("d1")!, epoch: 1, announce: false)
        h.receive(Payload(Array(applied.utf8)), from: robot, now: 0)
        #expect(reports.frames == [applied, applied] && base.drain(app) == [])
    }
}

/// Records the robot's `settings_applied` frames the hub reports.
final class SettingsRecorder: DeviceHubObserver {
    var frames: [String] = []
    func hubSettingsApplied(_ device: DeviceID, _ frame: Payload) { frames.append(String(decoding: frame.bytes, as: UTF8.self)) }
}
