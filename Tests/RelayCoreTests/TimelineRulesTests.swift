import Testing
@testable import RelayCore

/// The timeline's pure rules (docs/protocol.md v1.6): entry IDs, what a robot's frame is kept
/// under, a page's limit and where a caller's view begins.
@Suite struct TimelineRulesTests {
    let device = DeviceID("robot-42")!, other = DeviceID("robot-43")!

    @Test func anIDNamesItsDeviceAndOrdersAsItsNumber() {
        let ids = [1, 2, 15, 16, 255, 4096, Int64.max].map { TimelineID(device: device, number: $0).text }
        #expect(ids == ids.sorted() && Set(ids).count == ids.count)
        for id in ids {
            #expect(id.utf8.count <= 64 && id.utf8.allSatisfy { $0 == UInt8(ascii: "-") || $0 == UInt8(ascii: "_") || (48...57).contains($0)
                || (65...90).contains($0) || (97...122).contains($0) })
            #expect(TimelineID(id, device: device)?.text == id)
            #expect(TimelineID(id, device: other) == nil)  // another device's, even with no entry behind it
        }
        for malformed in ["", "x", ids[0] + "0", String(ids[0].dropLast()) + "G", String(ids[0].dropLast()) + "F"] {
            #expect(TimelineID(malformed, device: device) == nil, "\(malformed)")
        }
    }

    @Test func keptFramesByNameAndARunOnlyWhenItEnded() {
        func kept(_ text: String) -> String? {
            let bytes = Array(text.utf8)
            return bytes.withUnsafeBufferPointer { buffer in
                TimelineRules.keptName(buffer, Envelope.scan(buffer))
            }
        }
        #expect(kept(#"{"type":"event","event":"bark_detected","data":{}}"#) == "bark_detected")
        #expect(kept(#"{"type":"event", "event" : "mode_changed","data":{"mode":"idle"}}"#) == "mode_changed")
        #expect(kept(#"{"type":"event","event":"audio_state","data":{}}"#) == nil)
        #expect(kept(#"{"type":"event","event":"mission_progress","data":{"status":"running"}}"#) == nil)
        for status in ["success", "failed", "completed"] {
            #expect(kept(#"{"type":"event","event":"mission_progress","data":{"stage":3,"status":"\#(status)"}}"#) == "mission_progress")
        }
        // Spelled as Python's json.dumps sends it, with escapes, or where only a nested value says it.
        #expect(kept(#"{"type": "event", "event": "mission_progress", "data": {"pad": "a\"b\\", "status": "completed"}}"#) == "mission_progress")
        #expect(kept(#"{"type":"event","event":"mission_progress","data":{"status":"\u0073uccess"}}"#) == "mission_progress")
        #expect(kept(#"{"type":"event","event":"mission_progress","data":{"status":"\u0072unning"}}"#) == nil)
        #expect(kept(#"{"type":"event","event":"mission_progress","data":{"run":{"status":"completed"}},"x":{"status":"failed"}}"#) == nil)
        #expect(kept(#"{"type":"event","event":"mission_progress","note":"\"status\":\"failed\"","data":{"stage":1}}"#) == nil)
        #expect(kept(#"{"type":"event","event":"mission_progress","data":{"status":"completed""#) == nil)  // cut short
        // As the robot library writes a run's progress: the status first in `data`, read in place.
        for status in ["success", "failed", "completed"] {
            #expect(kept(#"{"type":"event","event":"mission_progress","data":{"status":"\#(status)","stage":2}}"#) == "mission_progress")
        }
        for status in ["watching", "succes", "successes", "", #"comp\"leted"#] {
            #expect(kept(#"{"type":"event","event":"mission_progress","data":{"status":"\#(status)","stage":2}}"#) == nil, "\(status)")
        }
        #expect(kept(#"{"type":"event","event":"mission_progress","data":{"status":"watching","note":"completed"}}"#) == nil)
        #expect(kept(#"{"type":"event","event":"mission_progress","data":{"status":7,"x":"failed"}}"#) == nil)
        #expect(kept(#"{"type":"event","event":"mission_progress","data":{"status":"\u0066ailed"}}"#) == "mission_progress")
        for name in TimelineRules.keptEvents {
            #expect(kept(#"{"type":"event","event":"\#(name)","data":{}}"#) == name)
            #expect(kept(#"{"type":"sealed","kind":"\#(name)","ct":"x"}"#) == name)
        }
        #expect(kept(#"{"type":"sealed","kind":"mission_completed","ct":"x"}"#) == "mission_completed")
        #expect(kept(#"{"type":"sealed","kind":"mission_progress","ct":"x"}"#) == nil)
        #expect(kept(#"{"type":"command","id":"1","command":"bark_detected"}"#) == nil)
    }

    @Test func aLimitIsOneTo500AndBeginsIsTheLatestBound() {
        #expect(TimelineRules.limit(nil) == 50 && TimelineRules.limit("1") == 1 && TimelineRules.limit("500") == 500)
        for bad in ["", "0", "501", "-1", "1.5", "ten", "+5"] { #expect(TimelineRules.limit(bad) == nil, "\(bad)") }
        let now = UnixTime(seconds: 100 * 86_400)
        #expect(TimelineRules.begins(now: now, days: 30, erasedAt: nil, keptSince: UnixTime(seconds: 0), guestSince: nil) == UnixTime(seconds: 70 * 86_400))
        #expect(TimelineRules.begins(now: now, days: 30, erasedAt: UnixTime(seconds: 80 * 86_400), keptSince: UnixTime(seconds: 0),
                                     guestSince: UnixTime(seconds: 90 * 86_400)) == UnixTime(seconds: 90 * 86_400))
    }
}
