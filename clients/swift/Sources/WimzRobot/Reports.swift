// The robot's reports (the guide's §6).
import Foundation
import WimzProtocol

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
