// The robot's REST answers and events as the integration guide's §10.4 models (shared/guide,
// Build 31): the guide's type and property names and its snake_case coding keys. Every property
// is optional, so a robot on other software that leaves a field out still decodes; unknown
// fields are ignored. Additions: `AudioState` (§7.3 has the event, §10.4 no model), the start
// and set-mode answers, `StageInfo` and the §6.4 comparison, all with the guide's JSON keys.
import Foundation

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

    enum CodingKeys: String, CodingKey {
        case name, description, enabled, stages
        case maxRewards = "max_rewards"
        case durationMinutes = "duration_minutes"
    }

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

    enum CodingKeys: String, CodingKey {
        case success, message, error
        case missionName = "mission_name"
        case missionId = "mission_id"
    }

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

    enum CodingKeys: String, CodingKey {
        case name, timeout, elapsed
        case successEvent = "success_event"
    }

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

    enum CodingKeys: String, CodingKey {
        case active, state, duration
        case missionId = "mission_id"
        case missionName = "mission_name"
        case dogId = "dog_id"
        case dogName = "dog_name"
        case trickRequested = "trick_requested"
        case currentStage = "current_stage"
        case totalStages = "total_stages"
        case stageInfo = "stage_info"
        case rewardsGiven = "rewards_given"
        case maxRewards = "max_rewards"
        case maxDuration = "max_duration"
    }

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

/// The `mission_progress` event (§7.1): the live training state.
public struct MissionProgress: Codable, Sendable, Equatable {
    public var status: String?
    public var trick: String?
    public var stage: Int?
    public var totalStages: Int?
    public var dogName: String?
    public var rewards: Int?
    public var progress: Double?
    public var targetSec: Double?

    enum CodingKeys: String, CodingKey {
        case status, trick, stage, rewards, progress
        case totalStages = "total_stages"
        case dogName = "dog_name"
        case targetSec = "target_sec"
    }

    public init(status: String? = nil, trick: String? = nil, stage: Int? = nil, totalStages: Int? = nil, dogName: String? = nil, rewards: Int? = nil, progress: Double? = nil, targetSec: Double? = nil) {
        self.status = status
        self.trick = trick
        self.stage = stage
        self.totalStages = totalStages
        self.dogName = dogName
        self.rewards = rewards
        self.progress = progress
        self.targetSec = targetSec
    }
}

/// One of `GET /programs/available`'s programs (§4.1).
public struct Program: Codable, Sendable, Equatable, Identifiable {
    public var id: String { name ?? "" }
    public var name: String?
    public var displayName: String?
    public var description: String?
    public var missions: [String]?
    public var createdBy: String?
    public var dailyTreatLimit: Int?

    enum CodingKeys: String, CodingKey {
        case name, description, missions
        case displayName = "display_name"
        case createdBy = "created_by"
        case dailyTreatLimit = "daily_treat_limit"
    }

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

    enum CodingKeys: String, CodingKey {
        case state
        case programName = "program_name"
        case displayName = "display_name"
        case currentMission = "current_mission"
        case currentMissionIndex = "current_mission_index"
        case totalMissions = "total_missions"
        case missionsCompleted = "missions_completed"
        case missionsFailed = "missions_failed"
        case treatsDispensed = "treats_dispensed"
        case dailyTreatLimit = "daily_treat_limit"
        case elapsedSeconds = "elapsed_seconds"
    }

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

/// `GET /mode` (§5.1).
public struct ModeInfo: Codable, Sendable, Equatable {
    public var mode: String?
    public var modeInfo: ModeDetails?

    enum CodingKeys: String, CodingKey {
        case mode
        case modeInfo = "mode_info"
    }

    public init(mode: String? = nil, modeInfo: ModeDetails? = nil) {
        self.mode = mode
        self.modeInfo = modeInfo
    }
}

/// `ModeInfo.modeInfo`: while `locked`, the app disables its mode selector.
public struct ModeDetails: Codable, Sendable, Equatable {
    public var locked: Bool?
    public var lockReason: String?
    public var since: String?

    enum CodingKeys: String, CodingKey {
        case locked, since
        case lockReason = "lock_reason"
    }

    public init(locked: Bool? = nil, lockReason: String? = nil, since: String? = nil) {
        self.locked = locked
        self.lockReason = lockReason
        self.since = since
    }
}

/// `POST /mode` (§5.2): `success` false with `error` while the mode is locked.
public struct ModeSetResponse: Codable, Sendable, Equatable {
    public var success: Bool?
    public var mode: String?
    public var previousMode: String?
    public var error: String?

    enum CodingKeys: String, CodingKey {
        case success, mode, error
        case previousMode = "previous_mode"
    }

    public init(success: Bool? = nil, mode: String? = nil, previousMode: String? = nil, error: String? = nil) {
        self.success = success
        self.mode = mode
        self.previousMode = previousMode
        self.error = error
    }
}

/// The `mode_changed` event (§7.2): while `locked`, the app disables its mode selector.
public struct ModeChange: Codable, Sendable, Equatable {
    public var mode: String?
    public var previousMode: String?
    public var locked: Bool?
    public var lockReason: String?

    enum CodingKeys: String, CodingKey {
        case mode, locked
        case previousMode = "previous_mode"
        case lockReason = "lock_reason"
    }

    public init(mode: String? = nil, previousMode: String? = nil, locked: Bool? = nil, lockReason: String? = nil) {
        self.mode = mode
        self.previousMode = previousMode
        self.locked = locked
        self.lockReason = lockReason
    }
}

/// The `audio_state` event (§7.3): the music player's state.
public struct AudioState: Codable, Sendable, Equatable {
    public var state: String?
    public var track: String?
    public var playing: Bool?
    public var playlistIndex: Int?
    public var playlistLength: Int?

    enum CodingKeys: String, CodingKey {
        case state, track, playing
        case playlistIndex = "playlist_index"
        case playlistLength = "playlist_length"
    }

    public init(state: String? = nil, track: String? = nil, playing: Bool? = nil, playlistIndex: Int? = nil, playlistLength: Int? = nil) {
        self.state = state
        self.track = track
        self.playing = playing
        self.playlistIndex = playlistIndex
        self.playlistLength = playlistLength
    }
}

/// The `bark_detected` event (§7.4).
public struct BarkEvent: Codable, Sendable, Equatable {
    public var emotion: String?
    public var confidence: Double?
    public var loudnessDb: Double?
    public var dogId: String?
    public var dogName: String?

    enum CodingKeys: String, CodingKey {
        case emotion, confidence
        case loudnessDb = "loudness_db"
        case dogId = "dog_id"
        case dogName = "dog_name"
    }

    public init(emotion: String? = nil, confidence: Double? = nil, loudnessDb: Double? = nil, dogId: String? = nil, dogName: String? = nil) {
        self.emotion = emotion
        self.confidence = confidence
        self.loudnessDb = loudnessDb
        self.dogId = dogId
        self.dogName = dogName
    }
}

/// The `dog_detected` event (§7.5): `bbox` is x1, y1, x2, y2 in pixels.
public struct DogEvent: Codable, Sendable, Equatable {
    public var dogId: String?
    public var dogName: String?
    public var bbox: [Int]?
    public var confidence: Double?

    enum CodingKeys: String, CodingKey {
        case bbox, confidence
        case dogId = "dog_id"
        case dogName = "dog_name"
    }

    public init(dogId: String? = nil, dogName: String? = nil, bbox: [Int]? = nil, confidence: Double? = nil) {
        self.dogId = dogId
        self.dogName = dogName
        self.bbox = bbox
        self.confidence = confidence
    }
}

/// The `treat_dispensed` event (§7.6).
public struct TreatEvent: Codable, Sendable, Equatable {
    public var dogId: String?
    public var dogName: String?
    public var behavior: String?
    public var dailyCount: Int?
    public var dailyLimit: Int?

    enum CodingKeys: String, CodingKey {
        case behavior
        case dogId = "dog_id"
        case dogName = "dog_name"
        case dailyCount = "daily_count"
        case dailyLimit = "daily_limit"
    }

    public init(dogId: String? = nil, dogName: String? = nil, behavior: String? = nil, dailyCount: Int? = nil, dailyLimit: Int? = nil) {
        self.dogId = dogId
        self.dogName = dogName
        self.behavior = behavior
        self.dailyCount = dailyCount
        self.dailyLimit = dailyLimit
    }
}

/// `WeeklyReportResponse.report` (§6.1).
public struct WeeklyReport: Codable, Sendable, Equatable {
    public var weekStart: String?
    public var weekEnd: String?
    public var weekNumber: Int?
    public var year: Int?
    public var barkStats: BarkStats?
    public var rewardStats: RewardStats?
    public var coaching: CoachingStats?
    public var highlights: [String]?

    enum CodingKeys: String, CodingKey {
        case year, coaching, highlights
        case weekStart = "week_start"
        case weekEnd = "week_end"
        case weekNumber = "week_number"
        case barkStats = "bark_stats"
        case rewardStats = "reward_stats"
    }

    public init(weekStart: String? = nil, weekEnd: String? = nil, weekNumber: Int? = nil, year: Int? = nil, barkStats: BarkStats? = nil, rewardStats: RewardStats? = nil, coaching: CoachingStats? = nil, highlights: [String]? = nil) {
        self.weekStart = weekStart
        self.weekEnd = weekEnd
        self.weekNumber = weekNumber
        self.year = year
        self.barkStats = barkStats
        self.rewardStats = rewardStats
        self.coaching = coaching
        self.highlights = highlights
    }
}

/// `GET /reports/weekly` (§6.1).
public struct WeeklyReportResponse: Codable, Sendable, Equatable {
    public var success: Bool?
    public var report: WeeklyReport?

    public init(success: Bool? = nil, report: WeeklyReport? = nil) {
        self.success = success
        self.report = report
    }
}

/// Barks of a week (§6.1).
public struct BarkStats: Codable, Sendable, Equatable {
    public var total: Int?
    public var avgLoudness: Double?
    public var byEmotion: [String: Int]?
    public var byDog: [String: Int]?

    enum CodingKeys: String, CodingKey {
        case total
        case avgLoudness = "avg_loudness"
        case byEmotion = "by_emotion"
        case byDog = "by_dog"
    }

    public init(total: Int? = nil, avgLoudness: Double? = nil, byEmotion: [String: Int]? = nil, byDog: [String: Int]? = nil) {
        self.total = total
        self.avgLoudness = avgLoudness
        self.byEmotion = byEmotion
        self.byDog = byDog
    }
}

/// Treats of a week (§6.1).
public struct RewardStats: Codable, Sendable, Equatable {
    public var totalTreats: Int?
    public var byBehavior: [String: Int]?
    public var byDog: [String: Int]?

    enum CodingKeys: String, CodingKey {
        case totalTreats = "total_treats"
        case byBehavior = "by_behavior"
        case byDog = "by_dog"
    }

    public init(totalTreats: Int? = nil, byBehavior: [String: Int]? = nil, byDog: [String: Int]? = nil) {
        self.totalTreats = totalTreats
        self.byBehavior = byBehavior
        self.byDog = byDog
    }
}

/// Coaching of a week (§6.1).
public struct CoachingStats: Codable, Sendable, Equatable {
    public var sessions: Int?
    public var successRate: Double?
    public var tricksPracticed: [String: Int]?

    enum CodingKeys: String, CodingKey {
        case sessions
        case successRate = "success_rate"
        case tricksPracticed = "tricks_practiced"
    }

    public init(sessions: Int? = nil, successRate: Double? = nil, tricksPracticed: [String: Int]? = nil) {
        self.sessions = sessions
        self.successRate = successRate
        self.tricksPracticed = tricksPracticed
    }
}

/// `DogProgressResponse.progress` (§6.2).
public struct DogProgress: Codable, Sendable, Equatable {
    public var dogId: String?
    public var dogName: String?
    public var weeksAnalyzed: Int?
    public var tricks: [String: TrickStats]?
    public var barkStats: DogBarkStats?
    public var treatsEarned: Int?
    public var coachingSessions: Int?
    public var improvementAreas: [String]?
    public var strengths: [String]?

    enum CodingKeys: String, CodingKey {
        case tricks, strengths
        case dogId = "dog_id"
        case dogName = "dog_name"
        case weeksAnalyzed = "weeks_analyzed"
        case barkStats = "bark_stats"
        case treatsEarned = "treats_earned"
        case coachingSessions = "coaching_sessions"
        case improvementAreas = "improvement_areas"
    }

    public init(dogId: String? = nil, dogName: String? = nil, weeksAnalyzed: Int? = nil, tricks: [String: TrickStats]? = nil, barkStats: DogBarkStats? = nil, treatsEarned: Int? = nil, coachingSessions: Int? = nil, improvementAreas: [String]? = nil, strengths: [String]? = nil) {
        self.dogId = dogId
        self.dogName = dogName
        self.weeksAnalyzed = weeksAnalyzed
        self.tricks = tricks
        self.barkStats = barkStats
        self.treatsEarned = treatsEarned
        self.coachingSessions = coachingSessions
        self.improvementAreas = improvementAreas
        self.strengths = strengths
    }
}

/// `GET /reports/dog/{id}` (§6.2).
public struct DogProgressResponse: Codable, Sendable, Equatable {
    public var success: Bool?
    public var progress: DogProgress?

    public init(success: Bool? = nil, progress: DogProgress? = nil) {
        self.success = success
        self.progress = progress
    }
}

/// One trick's record in `DogProgress.tricks` (§6.2).
public struct TrickStats: Codable, Sendable, Equatable {
    public var attempts: Int?
    public var successes: Int?
    public var rate: Double?
    public var trend: String?

    public init(attempts: Int? = nil, successes: Int? = nil, rate: Double? = nil, trend: String? = nil) {
        self.attempts = attempts
        self.successes = successes
        self.rate = rate
        self.trend = trend
    }
}

/// `DogProgress.barkStats` (§6.2).
public struct DogBarkStats: Codable, Sendable, Equatable {
    public var total: Int?
    public var weeklyAverage: Double?
    public var trend: String?

    enum CodingKeys: String, CodingKey {
        case total, trend
        case weeklyAverage = "weekly_average"
    }

    public init(total: Int? = nil, weeklyAverage: Double? = nil, trend: String? = nil) {
        self.total = total
        self.weeklyAverage = weeklyAverage
        self.trend = trend
    }
}

/// `TrendsResponse.trends` (§6.3).
public struct Trends: Codable, Sendable, Equatable {
    public var weeksAnalyzed: Int?
    public var barkTrend: [WeekData]?
    public var summary: TrendSummary?

    enum CodingKeys: String, CodingKey {
        case summary
        case weeksAnalyzed = "weeks_analyzed"
        case barkTrend = "bark_trend"
    }

    public init(weeksAnalyzed: Int? = nil, barkTrend: [WeekData]? = nil, summary: TrendSummary? = nil) {
        self.weeksAnalyzed = weeksAnalyzed
        self.barkTrend = barkTrend
        self.summary = summary
    }
}

/// `GET /reports/trends` (§6.3).
public struct TrendsResponse: Codable, Sendable, Equatable {
    public var success: Bool?
    public var trends: Trends?

    public init(success: Bool? = nil, trends: Trends? = nil) {
        self.success = success
        self.trends = trends
    }
}

/// One week of `Trends.barkTrend` (§6.3).
public struct WeekData: Codable, Sendable, Equatable {
    public var week: Int?
    public var count: Int?

    public init(week: Int? = nil, count: Int? = nil) {
        self.week = week
        self.count = count
    }
}

/// `Trends.summary` (§6.3).
public struct TrendSummary: Codable, Sendable, Equatable {
    public var barkChangePercent: Double?
    public var bestPerformingDog: String?

    enum CodingKeys: String, CodingKey {
        case barkChangePercent = "bark_change_percent"
        case bestPerformingDog = "best_performing_dog"
    }

    public init(barkChangePercent: Double? = nil, bestPerformingDog: String? = nil) {
        self.barkChangePercent = barkChangePercent
        self.bestPerformingDog = bestPerformingDog
    }
}

/// One dog of `Comparison.dogs` (§6.4).
public struct DogComparison: Codable, Sendable, Equatable {
    public var dogId: String?
    public var name: String?
    public var totalTreats: Int?
    public var coachingSessions: Int?
    public var barkCount: Int?
    public var bestTrick: String?
    public var needsWork: String?

    enum CodingKeys: String, CodingKey {
        case name
        case dogId = "dog_id"
        case totalTreats = "total_treats"
        case coachingSessions = "coaching_sessions"
        case barkCount = "bark_count"
        case bestTrick = "best_trick"
        case needsWork = "needs_work"
    }

    public init(dogId: String? = nil, name: String? = nil, totalTreats: Int? = nil, coachingSessions: Int? = nil, barkCount: Int? = nil, bestTrick: String? = nil, needsWork: String? = nil) {
        self.dogId = dogId
        self.name = name
        self.totalTreats = totalTreats
        self.coachingSessions = coachingSessions
        self.barkCount = barkCount
        self.bestTrick = bestTrick
        self.needsWork = needsWork
    }
}

/// `Comparison.leaderBoard` (§6.4).
public struct LeaderBoard: Codable, Sendable, Equatable {
    public var mostTreats: String?
    public var quietest: String?
    public var bestLearner: String?

    enum CodingKeys: String, CodingKey {
        case quietest
        case mostTreats = "most_treats"
        case bestLearner = "best_learner"
    }

    public init(mostTreats: String? = nil, quietest: String? = nil, bestLearner: String? = nil) {
        self.mostTreats = mostTreats
        self.quietest = quietest
        self.bestLearner = bestLearner
    }
}

/// `ComparisonResponse.comparison` (§6.4).
public struct Comparison: Codable, Sendable, Equatable {
    public var dogs: [DogComparison]?
    public var leaderBoard: LeaderBoard?

    enum CodingKeys: String, CodingKey {
        case dogs
        case leaderBoard = "leader_board"
    }

    public init(dogs: [DogComparison]? = nil, leaderBoard: LeaderBoard? = nil) {
        self.dogs = dogs
        self.leaderBoard = leaderBoard
    }
}

/// `GET /reports/compare` (§6.4).
public struct ComparisonResponse: Codable, Sendable, Equatable {
    public var success: Bool?
    public var comparison: Comparison?

    public init(success: Bool? = nil, comparison: Comparison? = nil) {
        self.success = success
        self.comparison = comparison
    }
}

extension MissionProgress {
    /// The hold's progress bar while `status` is `watching` (§7.1): `progress / targetSec`, 0…1.
    public var fraction: Double? {
        guard let progress, let targetSec, targetSec > 0 else { return nil }
        return min(max(progress / targetSec, 0), 1)
    }
}
