import Testing
import RelayCore
import WimzProtocol

/// A device's mission run (docs/protocol.md v1.4 "A mission run"): each rule with its case.
@Suite struct MissionRunTests {
    let t0 = UnixTime(seconds: 1_800_000_000)

    func progress(_ json: String) throws -> MissionSignal {
        .progress(try #require(MissionState(data: try JSONReader.parse(Array(json.utf8)))))
    }

    @Test func aRunBeginsWithProgressThatIsNotCompletedAndEndsWithCompleted() throws {
        var (run, change) = MissionRun.next(nil, try progress(#"{"status":"completed"}"#), at: t0)
        #expect(run == nil && change == nil, "a lone completed opens nothing")
        (run, change) = MissionRun.next(nil, try progress(#"{"status":"waiting_for_dog","trick":"sit","dog_name":"Rex"}"#), at: t0)
        #expect(run?.openedAt == t0)
        #expect(change == .began(MissionState(status: "waiting_for_dog", trick: "sit", dogName: "Rex")))
        (run, change) = MissionRun.next(run, try progress(#"{"status":"watching","trick":"sit","progress":0.5}"#), at: t0)
        #expect(change == .changed(MissionState(status: "watching", trick: "sit", progress: 0.5), statusChanged: true))
        (run, change) = MissionRun.next(run, try progress(#"{"status":"watching","trick":"sit","progress":0.75}"#), at: t0)
        #expect(change == .changed(MissionState(status: "watching", trick: "sit", progress: 0.75), statusChanged: false))
        (run, change) = MissionRun.next(run, try progress(#"{"status":"watching","trick":"sit","progress":0.75}"#), at: t0)
        #expect(change == nil, "the same state again changes nothing")
        (run, change) = MissionRun.next(run, try progress(#"{"status":"completed","trick":"sit","rewards":3}"#), at: t0)
        #expect(run == nil && change == .ended(MissionState(status: "completed", trick: "sit", rewards: 3), .completed))
    }

    @Test func leavingMissionModeEndsTheRunOtherModeChangesDoNot() throws {
        let (open, _) = MissionRun.next(nil, try progress(#"{"status":"watching"}"#), at: t0)
        #expect(MissionRun.next(open, .modeChanged(previous: "idle", mode: "coach"), at: t0).change == nil)
        #expect(MissionRun.next(open, .modeChanged(previous: "mission", mode: "mission"), at: t0).change == nil)
        let (run, change) = MissionRun.next(open, .modeChanged(previous: "mission", mode: "idle"), at: t0)
        #expect(run == nil && change == .ended(MissionState(status: "watching"), .leftMission))
        #expect(MissionRun.next(nil, .modeChanged(previous: "mission", mode: "idle"), at: t0).change == nil)
    }

    @Test func theRobotLeavingMarksTheStateAndItsAbsenceEndsTheRun() throws {
        var (run, change) = MissionRun.next(nil, try progress(#"{"status":"watching","stage":2}"#), at: t0)
        (run, change) = MissionRun.next(run, .robotOnline(false), at: t0)
        #expect(change == .changed(MissionState(status: "watching", stage: 2, robotOnline: false), statusChanged: false))
        // Progress while marked away keeps the flag until the robot is back.
        (run, change) = MissionRun.next(run, try progress(#"{"status":"watching","stage":3}"#), at: t0)
        #expect(change == .changed(MissionState(status: "watching", stage: 3, robotOnline: false), statusChanged: false))
        (run, change) = MissionRun.next(run, .robotOnline(true), at: t0)
        #expect(change == .changed(MissionState(status: "watching", stage: 3), statusChanged: false))
        (run, change) = MissionRun.next(run, .robotGone, at: t0)
        #expect(run == nil && change == .ended(MissionState(status: "watching", stage: 3, robotOnline: false), .robotAway))
        #expect(MissionRun.next(nil, .robotGone, at: t0).change == nil)
    }

    @Test func theStateTakesEachMemberAsItsTypeCutsLongStringsAndWritesEveryMember() throws {
        let long = String(repeating: "x", count: 100)
        let state = try #require(MissionState(data: try JSONReader.parse(Array(
            #"{"status":"watching","trick":"\#(long)","stage":2.0,"total_stages":"5","dog_name":null,"rewards":1.5,"progress":1,"target_sec":3.5,"extra":true}"#.utf8))))
        #expect(state == MissionState(status: "watching", trick: String(repeating: "x", count: 64), stage: 2, progress: 1, targetSec: 3.5))
        #expect(state.contentState.encoded
                == #"{"status":"watching","trick":"\#(String(repeating: "x", count: 64))","stage":2,"total_stages":null,"dog_name":null,"rewards":null,"progress":1.0,"target_sec":3.5,"robot_online":true}"#)
        #expect(MissionState(contentState: state.contentState) == state)
        var away = state
        away.robotOnline = false
        #expect(MissionState(contentState: away.contentState) == away)
        #expect(MissionState(data: try JSONReader.parse(Array("[1]".utf8))) == nil)
    }
}
