import Foundation
import Testing
import WimzRelayClient
@testable import WimzRobot

/// The robot's product: the guide's models, typed events, the observable model. No relay, no
/// database.
@Suite struct RobotModelTests {
    /// Through the relay, the robot's API is the protocol's `/api/devices/ID/robot` under the
    /// relay's base (a path prefix kept).
    @Test func theRelayRouteIsTheProtocolsRobotPath() {
        let route = RobotRoute.relay(URL(string: "https://relay.example/prefix")!, deviceID: "robot-1", token: "t")
        #expect(route.baseURL.absoluteString == "https://relay.example/prefix/api/devices/robot-1/robot")
        #expect(route.baseURL.appendingPathComponent("mode").path == "/prefix/api/devices/robot-1/robot/mode")
    }

    /// The guide's commands as typed values: parameters with the robot's snake_case keys, replies
    /// from what the robot answers (the stand-in's, as the guide's §3.2 and §5.2 bodies).
    @Test func theGuidesCommandsEncodeTheirBodiesAndDecodeTheirAnswers() throws {
        #expect(try StartMission(missionName: "sit_training", parameters: ["dog_id": "elsa"]).parameters()
                == ["mission_name": "sit_training", "parameters": ["dog_id": "elsa"]])
        #expect(try SetMode(mode: "coach").parameters() == ["mode": "coach"])
        #expect(try DispenseTreat().parameters() == [:] && PingRobot.name == "ping" && DispenseTreat.name == "treat")
        let started = try JSON(parsing: #"{"success":true,"message":"Mission 'sit_training' started successfully","mission_name":"sit_training","mission_id":42}"#)
        #expect(try started.decode(StartMission.Reply.self, snakeCaseKeys: true)
                == MissionStartResponse(success: true, message: "Mission 'sit_training' started successfully", missionName: "sit_training", missionId: 42))
        let locked = try JSON(parsing: #"{"success":false,"error":"Mode locked: Mission active: sit_training"}"#)
        #expect(try locked.decode(SetMode.Reply.self, snakeCaseKeys: true).error == "Mode locked: Mission active: sit_training")
    }

    @Test func theLastKnownStateTypesItsEventsAsTheGuidesModels() throws {
        let body = #"{"device_id":"d","online":false,"last_seen":"2026-11-22T10:00:00Z","events":{"mode_changed":{"message":{"type":"event","event":"mode_changed","data":{"mode":"coach","previous_mode":"idle"}},"received_at":"2026-11-22T09:59:00Z"},"audio_state":{"message":{"type":"event","event":"audio_state","data":{"playing":"not a bool"}},"received_at":"2026-11-22T09:58:00Z"},"bogus":{"message":"not an object"}}}"#
        let state = try LastKnownState.decode(Data(body.utf8))
        #expect(state.deviceID == "d" && !state.online && state.lastSeen == Date(timeIntervalSince1970: 1_795_341_600))
        #expect(state.mode == ModeChange(mode: "coach", previousMode: "idle"))
        #expect(state.events["mode_changed"]?.receivedAt == Date(timeIntervalSince1970: 1_795_341_540))
        #expect(state.audio == nil && state.events["audio_state"] != nil, "a field of another type: kept, no model")
        #expect(state.events["bogus"] == nil && state.missionProgress == nil)
        #expect(throws: RelayClientError.self) { try LastKnownState.decode(Data(#"{"online":true}"#.utf8)) }
    }

    @Test func eventsAreTypedAndUnknownOnesPassThroughRaw() throws {
        func event(_ text: String) throws -> RobotEvent? { try RelayEvent(text: text).robotEvent }
        guard case .modeChanged(let mode)? = try event(#"{"type":"event","event":"mode_changed","data":{"mode":"coach","previous_mode":"idle","extra":1}}"#)
        else { Issue.record("not a mode_changed"); return }
        #expect(mode.model == ModeChange(mode: "coach", previousMode: "idle"), "missing fields are nil, unknown ones ignored")
        guard case .treatDispensed(let treat)? = try event(#"{"type":"event","event":"treat_dispensed","data":{"daily_count":"many"}}"#)
        else { Issue.record("not a treat_dispensed"); return }
        #expect(treat.model == nil && treat.data["daily_count"] == "many", "a field of another type: no model, the data kept")
        let unknownText = #"{"type":"event","event":"battery","data":{"level":0.5}}"#
        #expect(try event(unknownText) == .other(EventMessage(name: "battery", data: ["level": 0.5], timestamp: nil, raw: unknownText)))
        #expect(try event(#"{"type":"webrtc_answer","sdp":"v=0"}"#) == nil)
    }

    /// Every §7 example of the integration guide (Build 31), verbatim, as the robot sends it.
    @Test func theGuidesEventExamplesDecodeIntoItsModels() throws {
        func decoded(_ data: String, _ name: String) throws -> RobotEvent? {
            try RelayEvent(text: #"{"type":"event","event":"\#(name)","data":\#(data),"timestamp":"2026-01-30T10:15:30.123Z"}"#).robotEvent
        }
        guard case .missionProgress(let mission)? = try decoded("""
            {
                "status": "watching",
                "trick": "sit",
                "stage": 2,
                "total_stages": 5,
                "dog_name": "Elsa",
                "rewards": 1,
                "progress": 2.5,
                "target_sec": 5.0
              }
            """, "mission_progress") else { Issue.record("mission_progress"); return }
        #expect(mission.model == MissionProgress(status: "watching", trick: "sit", stage: 2, totalStages: 5, dogName: "Elsa",
                                                 rewards: 1, progress: 2.5, targetSec: 5.0))
        #expect(mission.model?.fraction == 0.5, "2.5 s of 5 s held is half, not 250 %")
        #expect(mission.timestamp == "2026-01-30T10:15:30.123Z" && mission.raw.contains("target_sec"))
        guard case .modeChanged(let mode)? = try decoded("""
            {
                "mode": "mission",
                "previous_mode": "idle",
                "locked": true,
                "lock_reason": "Mission active: sit_training"
              }
            """, "mode_changed") else { Issue.record("mode_changed"); return }
        #expect(mode.model == ModeChange(mode: "mission", previousMode: "idle", locked: true, lockReason: "Mission active: sit_training"))
        guard case .audioState(let audio)? = try decoded("""
            {
                "state": "playing",
                "track": "default/Wimz_theme.mp3",
                "playing": true,
                "playlist_index": 3,
                "playlist_length": 14
              }
            """, "audio_state") else { Issue.record("audio_state"); return }
        #expect(audio.model == AudioState(state: "playing", track: "default/Wimz_theme.mp3", playing: true, playlistIndex: 3, playlistLength: 14))
        guard case .barkDetected(let bark)? = try decoded("""
            {
                "emotion": "alert",
                "confidence": 0.85,
                "loudness_db": 75.2,
                "dog_id": "aruco_315",
                "dog_name": "Elsa"
              }
            """, "bark_detected") else { Issue.record("bark_detected"); return }
        #expect(bark.model == BarkEvent(emotion: "alert", confidence: 0.85, loudnessDb: 75.2, dogId: "aruco_315", dogName: "Elsa"))
        guard case .dogDetected(let dog)? = try decoded("""
            {
                "dog_id": "aruco_315",
                "dog_name": "Elsa",
                "bbox": [100, 150, 400, 500],
                "confidence": 0.92
              }
            """, "dog_detected") else { Issue.record("dog_detected"); return }
        #expect(dog.model == DogEvent(dogId: "aruco_315", dogName: "Elsa", bbox: [100, 150, 400, 500], confidence: 0.92))
        guard case .treatDispensed(let treat)? = try decoded("""
            {
                "dog_id": "aruco_315",
                "dog_name": "Elsa",
                "behavior": "sit",
                "daily_count": 5,
                "daily_limit": 15
              }
            """, "treat_dispensed") else { Issue.record("treat_dispensed"); return }
        #expect(treat.model == TreatEvent(dogId: "aruco_315", dogName: "Elsa", behavior: "sit", dailyCount: 5, dailyLimit: 15))
    }

    /// The REST models read the guide's §3–§6 answers (a few, with nesting) by its snake_case keys.
    @Test func theGuidesRESTAnswersDecode() throws {
        let status = try RobotJSON.decoder().decode(MissionStatus.self, from: Data(#"{"active":true,"mission_id":42,"mission_name":"sit_training","current_stage":2,"total_stages":5,"stage_info":{"name":"Sit Practice 2","timeout":60.0,"elapsed":15.3,"success_event":"VisionEvent.Pose.Sit"},"rewards_given":1,"max_duration":1800}"#.utf8))
        #expect(status.missionId == 42 && status.currentStage == 2 && status.stageInfo?.successEvent == "VisionEvent.Pose.Sit" && status.maxDuration == 1800)
        let mode = try RobotJSON.decoder().decode(ModeInfo.self, from: Data(#"{"mode":"mission","mode_info":{"locked":true,"lock_reason":"Mission active: sit_training","since":"2026-01-30T10:15:30"}}"#.utf8))
        #expect(mode.modeInfo?.locked == true && mode.modeInfo?.lockReason == "Mission active: sit_training")
        let weekly = try RobotJSON.decoder().decode(WeeklyReportResponse.self, from: Data(#"{"success":true,"report":{"week_number":5,"bark_stats":{"total":45,"avg_loudness":72.5,"by_emotion":{"alert":20}},"coaching":{"success_rate":0.75}}}"#.utf8))
        #expect(weekly.report?.barkStats?.byEmotion == ["alert": 20] && weekly.report?.coaching?.successRate == 0.75)
        #expect(try RobotJSON.decoder().decode(MissionStatus.self, from: Data(#"{"active":false}"#.utf8)).missionId == nil)
    }
}

#if canImport(Observation)
/// The observable model follows the events a view needs (here without sockets).
@Suite struct ConnectionModelTests {
    @MainActor @Test func theModelFollowsTheEventsAViewShows() throws {
        let client = RelayClient(.init(url: URL(string: "http://127.0.0.1:1")!, deviceID: "d", token: "t"))
        // No relay here: the model is fed by hand (a cancelled URLSession task mid-flight upsets
        // swift-corelibs-foundation's task registry when the test ends).
        let model = RelayConnectionModel(client: client, loadsLastKnownState: false)
        func event(_ text: String) throws -> RelayEvent { try RelayEvent(text: text) }
        #expect(model.isModeSelectorEnabled)
        model.apply(try event(#"{"type":"event","event":"mode_changed","data":{"mode":"mission","locked":true,"lock_reason":"Mission active: sit_training"}}"#))
        #expect(!model.isModeSelectorEnabled && model.mode?.lockReason == "Mission active: sit_training")
        model.apply(try event(#"{"type":"event","event":"mission_progress","data":{"status":"watching","progress":2.5,"target_sec":5.0}}"#))
        #expect(model.missionProgress?.fraction == 0.5)
        model.apply(try event(#"{"type":"event","event":"device_status","data":{"device_id":"d","online":true,"since":"2026-11-22T10:00:00Z","epoch":"e","seq":3,"recovered":false}}"#))
        #expect(model.robotOnline && model.lastResumeRecovered == false)
        model.apply(.connection(.connected))
        #expect(model.connection == .connected)
    }

    @MainActor @Test func theLastKnownStateFillsOnlyWhatNoLiveEventDid() throws {
        let client = RelayClient(.init(url: URL(string: "http://127.0.0.1:1")!, deviceID: "d", token: "t"))
        let model = RelayConnectionModel(client: client, loadsLastKnownState: false)
        model.apply(try RelayEvent(text: #"{"type":"event","event":"mode_changed","data":{"mode":"coach"}}"#))
        let body = #"{"device_id":"d","online":false,"last_seen":"2026-11-22T10:00:00Z","events":{"mode_changed":{"message":{"type":"event","event":"mode_changed","data":{"mode":"idle"}},"received_at":"2026-11-22T09:00:00Z"},"audio_state":{"message":{"type":"event","event":"audio_state","data":{"playing":true,"track":"x.mp3"}},"received_at":"2026-11-22T09:00:00Z"}}}"#
        model.load(try LastKnownState.decode(Data(body.utf8)))
        #expect(model.mode?.mode == "coach", "a live event is fresher than the kept state")
        #expect(model.audio?.track == "x.mp3" && model.lastSeen == Date(timeIntervalSince1970: 1_795_341_600) && !model.robotOnline)
    }
}
#endif
