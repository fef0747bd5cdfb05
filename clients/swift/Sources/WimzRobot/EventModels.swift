// The robot's other events (the guide's §7.2–§7.6).
import Foundation

/// The `mode_changed` event (§7.2): while `locked`, the app disables its mode selector.
public struct ModeChange: Codable, Sendable, Equatable {
    public var mode: String?
    public var previousMode: String?
    public var locked: Bool?
    public var lockReason: String?


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


    public init(dogId: String? = nil, dogName: String? = nil, behavior: String? = nil, dailyCount: Int? = nil, dailyLimit: Int? = nil) {
        self.dogId = dogId
        self.dogName = dogName
        self.behavior = behavior
        self.dailyCount = dailyCount
        self.dailyLimit = dailyLimit
    }
}
