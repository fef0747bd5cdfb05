// The robot's mission answers and the `mission_progress` event (the guide's §3, §7.1, §10.4).
import Foundation
// The `mission_progress` event (§7.1), the live training state: WimzProtocol's one definition,
// which the relay and the lock screen's state (`MissionActivityAttributes.ContentState`) share.
@_exported import struct WimzProtocol.MissionProgress

/// Any answer with `success` and a `message` or `error` (stop, pause, resume, create, delete).
public struct GenericResponse: Codable, Sendable, Equatable {
    public var success: Bool?
    public var message: String?
    public var error: String?

    public init(success: Bool? = nil, message: String? = nil, error: String? = nil) {
        self.success = success
        self.message = message
        self.error = error
    }
}

/// One of `GET /missions/available`'s missions (§3.1).
public struct Mission: Codable, Sendable, Equatable, Identifiable {
    public var id: String { name ?? "" }
    public var name: String?
    public var description: String?
    public var enabled: Bool?
    public var maxRewards: Int?
    public var durationMinutes: Int?
    public var stages: Int?


    public init(name: String? = nil, description: String? = nil, enabled: Bool? = nil, maxRewards: Int? = nil, durationMinutes: Int? = nil, stages: Int? = nil) {
        self.name = name
        self.description = description
        self.enabled = enabled
        self.maxRewards = maxRewards
        self.durationMinutes = durationMinutes
        self.stages = stages
    }
}

/// `GET /missions/available` (§3.1).
public struct MissionsResponse: Codable, Sendable, Equatable {
    public var missions: [Mission]?

    public init(missions: [Mission]? = nil) {
        self.missions = missions
    }
}

/// `POST /missions/start` (§3.2).
public struct MissionStartResponse: Codable, Sendable, Equatable {
    public var success: Bool?
    public var message: String?
    public var missionName: String?
    public var missionId: Int?
    public var error: String?


    public init(success: Bool? = nil, message: String? = nil, missionName: String? = nil, missionId: Int? = nil, error: String? = nil) {
        self.success = success
        self.message = message
        self.missionName = missionName
        self.missionId = missionId
        self.error = error
    }
}

/// `MissionStatus.stageInfo` (§3.3).
public struct StageInfo: Codable, Sendable, Equatable {
    public var name: String?
    public var timeout: Double?
    public var elapsed: Double?
    public var successEvent: String?


    public init(name: String? = nil, timeout: Double? = nil, elapsed: Double? = nil, successEvent: String? = nil) {
        self.name = name
        self.timeout = timeout
        self.elapsed = elapsed
        self.successEvent = successEvent
    }
}

/// `GET /missions/status` (§3.3); only `active` when no mission runs.
public struct MissionStatus: Codable, Sendable, Equatable {
    public var active: Bool?
    public var missionId: Int?
    public var missionName: String?
    public var dogId: String?
    public var dogName: String?
    public var state: String?
    public var trickRequested: String?
    public var currentStage: Int?
    public var totalStages: Int?
    public var stageInfo: StageInfo?
    public var rewardsGiven: Int?
    public var maxRewards: Int?
    public var duration: Double?
    public var maxDuration: Double?


    public init(active: Bool? = nil, missionId: Int? = nil, missionName: String? = nil, dogId: String? = nil, dogName: String? = nil, state: String? = nil, trickRequested: String? = nil, currentStage: Int? = nil, totalStages: Int? = nil, stageInfo: StageInfo? = nil, rewardsGiven: Int? = nil, maxRewards: Int? = nil, duration: Double? = nil, maxDuration: Double? = nil) {
        self.active = active
        self.missionId = missionId
        self.missionName = missionName
        self.dogId = dogId
        self.dogName = dogName
        self.state = state
        self.trickRequested = trickRequested
        self.currentStage = currentStage
        self.totalStages = totalStages
        self.stageInfo = stageInfo
        self.rewardsGiven = rewardsGiven
        self.maxRewards = maxRewards
        self.duration = duration
        self.maxDuration = maxDuration
    }
}
