// The robot's mode answers (the guide's §5).
import Foundation

/// `GET /mode` (§5.1).
public struct ModeInfo: Codable, Sendable, Equatable {
    public var mode: String?
    public var modeInfo: ModeDetails?


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


    public init(success: Bool? = nil, mode: String? = nil, previousMode: String? = nil, error: String? = nil) {
        self.success = success
        self.mode = mode
        self.previousMode = previousMode
        self.error = error
    }
}
