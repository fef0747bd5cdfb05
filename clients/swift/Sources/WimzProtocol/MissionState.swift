/// A mission's progress as the robot reports it: the `mission_progress` event's `data`, member
/// for member (a member the robot did not send is nil). The one list of those members, shared by
/// the relay (which reads them from the robot's JSON with its own typing rules, RelayCore), the
/// app library's event model (`WimzRobot`) and the lock screen's state (``MissionState``).
///
/// Its keys are the contract's snake_case names, found whether or not a decoder converts keys
/// (`JSONDecoder`'s `.convertFromSnakeCase`, as the robot models are read, or plain `Codable`, as
/// ActivityKit reads a Live Activity's content state); it encodes them as the contract spells them.
public struct MissionProgress: Sendable, Hashable, Codable {
    /// The longest string member the relay keeps (docs/protocol.md v1.4).
    public static let maxStringLength = 64

    /// The guide's mission states: `waiting_for_dog`, `watching`, `success`, `completed`, …
    public var status: String?
    public var trick: String?
    public var stage: Int?
    public var totalStages: Int?
    public var dogName: String?
    public var rewards: Int?
    /// Seconds of the current hold so far (of `targetSec`).
    public var progress: Double?
    public var targetSec: Double?

    public init(status: String? = nil, trick: String? = nil, stage: Int? = nil, totalStages: Int? = nil, dogName: String? = nil,
                rewards: Int? = nil, progress: Double? = nil, targetSec: Double? = nil) {
        self.status = status
        self.trick = trick
        self.stage = stage
        self.totalStages = totalStages
        self.dogName = dogName
        self.rewards = rewards
        self.progress = progress
        self.targetSec = targetSec
    }

    /// The members by their contract names, in the contract's order.
    public enum Member: String, CaseIterable, Sendable, CodingKey {
        case status, trick, stage
        case totalStages = "total_stages"
        case dogName = "dog_name"
        case rewards, progress
        case targetSec = "target_sec"

        /// The name as `.convertFromSnakeCase` presents it (`totalStages`).
        var swiftName: String {
            let words = rawValue.split(separator: "_")
            return words.prefix(1).joined() + words.dropFirst().map { $0.prefix(1).uppercased() + $0.dropFirst() }.joined()
        }
    }

    public init(from decoder: any Decoder) throws {
        let members = try decoder.container(keyedBy: SpelledKey.self)
        self.init(status: try members.member(.status), trick: try members.member(.trick), stage: try members.member(.stage),
                  totalStages: try members.member(.totalStages), dogName: try members.member(.dogName),
                  rewards: try members.member(.rewards), progress: try members.member(.progress),
                  targetSec: try members.member(.targetSec))
    }

    public func encode(to encoder: any Encoder) throws {
        var members = encoder.container(keyedBy: Member.self)
        try members.encodeIfPresent(status, forKey: .status)
        try members.encodeIfPresent(trick, forKey: .trick)
        try members.encodeIfPresent(stage, forKey: .stage)
        try members.encodeIfPresent(totalStages, forKey: .totalStages)
        try members.encodeIfPresent(dogName, forKey: .dogName)
        try members.encodeIfPresent(rewards, forKey: .rewards)
        try members.encodeIfPresent(progress, forKey: .progress)
        try members.encodeIfPresent(targetSec, forKey: .targetSec)
    }
}

/// A mission run's state on the lock screen (docs/protocol.md v1.4 "A mission run"): the latest
/// ``MissionProgress`` and whether the robot is connected (the relay's own member), as
/// `aps.content-state` carries them — one flat object. The app's Live Activity decodes it with
/// plain `Codable` (`MissionActivityAttributes.ContentState`); the progress's members read as the
/// state's own (`state.dogName`).
@dynamicMemberLookup
public struct MissionState: Sendable, Hashable, Codable {
    /// The latest progress the robot reported (its members read as the state's own).
    public var reported: MissionProgress
    /// False while the robot is away (the relay noticed; the progress is the last it had).
    public var robotOnline: Bool

    public init(_ reported: MissionProgress = MissionProgress(), robotOnline: Bool = true) {
        self.reported = reported
        self.robotOnline = robotOnline
    }

    public init(status: String? = nil, trick: String? = nil, stage: Int? = nil, totalStages: Int? = nil, dogName: String? = nil,
                rewards: Int? = nil, progress: Double? = nil, targetSec: Double? = nil, robotOnline: Bool = true) {
        self.init(MissionProgress(status: status, trick: trick, stage: stage, totalStages: totalStages, dogName: dogName,
                                  rewards: rewards, progress: progress, targetSec: targetSec), robotOnline: robotOnline)
    }

    public subscript<Value>(dynamicMember member: WritableKeyPath<MissionProgress, Value>) -> Value {
        get { reported[keyPath: member] }
        set { reported[keyPath: member] = newValue }
    }

    private static let robotOnlineKey = (contract: "robot_online", swift: "robotOnline")

    public init(from decoder: any Decoder) throws {
        let members = try decoder.container(keyedBy: SpelledKey.self)
        guard let online: Bool = try members.member(Self.robotOnlineKey) else {
            throw DecodingError.keyNotFound(SpelledKey(Self.robotOnlineKey.contract),
                                            .init(codingPath: decoder.codingPath, debugDescription: "no robot_online"))
        }
        self.init(try MissionProgress(from: decoder), robotOnline: online)
    }

    public func encode(to encoder: any Encoder) throws {
        try reported.encode(to: encoder)  // the same object: `content-state` is flat
        var members = encoder.container(keyedBy: SpelledKey.self)
        try members.encode(robotOnline, forKey: SpelledKey(Self.robotOnlineKey.contract))
    }
}

/// A member's name as a decoder may present it: as the contract spells it, or converted from
/// snake_case.
private struct SpelledKey: CodingKey {
    let stringValue: String
    init(_ name: String) { stringValue = name }
    init?(stringValue: String) { self.stringValue = stringValue }
    var intValue: Int? { nil }
    init?(intValue: Int) { nil }
}

extension KeyedDecodingContainer<SpelledKey> {
    /// The member named `contract` (`total_stages`) or, by a converting decoder, `swift` (`totalStages`).
    fileprivate func member<T: Decodable>(_ names: (contract: String, swift: String)) throws -> T? {
        guard let key = [SpelledKey(names.contract), SpelledKey(names.swift)].first(where: contains) else { return nil }
        return try decodeIfPresent(T.self, forKey: key)
    }

    fileprivate func member<T: Decodable>(_ member: MissionProgress.Member) throws -> T? {
        try self.member((member.rawValue, member.swiftName))
    }
}
