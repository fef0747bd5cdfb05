// The robot's program answers, also the `program_progress` event's data (the guide's §4).
import Foundation

/// One of `GET /programs/available`'s programs (§4.1).
public struct Program: Codable, Sendable, Equatable, Identifiable {
    public var id: String { name ?? "" }
    public var name: String?
    public var displayName: String?
    public var description: String?
    public var missions: [String]?
    public var createdBy: String?
    public var dailyTreatLimit: Int?


    public init(name: String? = nil, displayName: String? = nil, description: String? = nil, missions: [String]? = nil, createdBy: String? = nil, dailyTreatLimit: Int? = nil) {
        self.name = name
        self.displayName = displayName
        self.description = description
        self.missions = missions
        self.createdBy = createdBy
        self.dailyTreatLimit = dailyTreatLimit
    }
}

/// `GET /programs/available` (§4.1).
public struct ProgramsResponse: Codable, Sendable, Equatable {
    public var success: Bool?
    public var programs: [Program]?
    public var count: Int?

    public init(success: Bool? = nil, programs: [Program]? = nil, count: Int? = nil) {
        self.success = success
        self.programs = programs
        self.count = count
    }
}

/// `POST /programs/start` (§4.2).
public struct ProgramStartResponse: Codable, Sendable, Equatable {
    public var success: Bool?
    public var message: String?
    public var status: ProgramStatus?
    public var error: String?

    public init(success: Bool? = nil, message: String? = nil, status: ProgramStatus? = nil, error: String? = nil) {
        self.success = success
        self.message = message
        self.status = status
        self.error = error
    }
}

/// `GET /programs/status` (§4.3), also the `program_progress` event's data.
public struct ProgramStatus: Codable, Sendable, Equatable {
    public var state: String?
    public var programName: String?
    public var displayName: String?
    public var currentMission: String?
    public var currentMissionIndex: Int?
    public var totalMissions: Int?
    public var missionsCompleted: [String]?
    public var missionsFailed: [String]?
    public var treatsDispensed: Int?
    public var dailyTreatLimit: Int?
    public var elapsedSeconds: Double?


    public init(state: String? = nil, programName: String? = nil, displayName: String? = nil, currentMission: String? = nil, currentMissionIndex: Int? = nil, totalMissions: Int? = nil, missionsCompleted: [String]? = nil, missionsFailed: [String]? = nil, treatsDispensed: Int? = nil, dailyTreatLimit: Int? = nil, elapsedSeconds: Double? = nil) {
        self.state = state
        self.programName = programName
        self.displayName = displayName
        self.currentMission = currentMission
        self.currentMissionIndex = currentMissionIndex
        self.totalMissions = totalMissions
        self.missionsCompleted = missionsCompleted
        self.missionsFailed = missionsFailed
        self.treatsDispensed = treatsDispensed
        self.dailyTreatLimit = dailyTreatLimit
        self.elapsedSeconds = elapsedSeconds
    }
}
