#if canImport(Observation)
import Foundation
import WimzRelayClient
import Observation

/// The robot as a SwiftUI view shows it, kept current from a ``RelayClient``'s events:
///
/// ```swift
/// @State var robot = RelayConnectionModel(client: client)
/// …
/// Picker("Mode", selection: $mode) { … }.disabled(!robot.isModeSelectorEnabled)
/// ProgressView(value: robot.missionProgress?.fraction ?? 0)
/// ```
///
/// Main-actor state, observable (Observation); any number of models may watch one client.
@available(macOS 14, iOS 17, *)
@Observable @MainActor
public final class RelayConnectionModel {
    public private(set) var connection: ConnectionState = .connecting
    public private(set) var robotOnline = false
    public private(set) var mode: ModeChange?
    public private(set) var missionProgress: MissionProgress?
    public private(set) var programProgress: ProgramStatus?
    public private(set) var audio: AudioState?
    public private(set) var lastBark: BarkEvent?
    public private(set) var lastDog: DogEvent?
    public private(set) var lastTreat: TreatEvent?
    /// False after a reconnect that could not recover every missed event: refetch state
    /// (``RobotAPI/missionStatus()``, ``RobotAPI/mode()``) then.
    public private(set) var lastResumeRecovered: Bool?
    /// When the robot was last connected, from the relay's last-known state (nil while unknown).
    public private(set) var lastSeen: Date?
    /// The robot's settings as last announced (v1.6): the desired version and the one the robot
    /// runs; a settings screen reads them again (``RelayClient/settings()``) when they change.
    public private(set) var settingsVersions: (desired: Int64?, reported: Int64?)?

    /// The guide's Must-Have: the mode selector is disabled while the mode is locked.
    public var isModeSelectorEnabled: Bool { mode?.locked != true }

    // Set once in init and only cancelled after: readable from the nonisolated deinit (an
    // `isolated deinit` needs Swift 6.2; the package supports 6.0).
    @ObservationIgnored nonisolated(unsafe) private var watcher: Task<Void, Never>?

    /// With `loadsLastKnownState` the model starts from what the relay kept of the robot (its
    /// latest mode, mission, audio and program state), so an app opened while the robot is
    /// offline shows something; live events replace it as they come.
    public init(client: RelayClient, loadsLastKnownState: Bool = true) {
        let events = client.subscribe()
        watcher = Task { [weak self] in
            if loadsLastKnownState, let state = try? await client.lastKnownState() { self?.load(state) }
            for await event in events { self?.apply(event) }
        }
    }

    /// Shows `state` where nothing fresher arrived yet.
    public func load(_ state: LastKnownState) {
        lastSeen = state.lastSeen
        if !robotOnline { robotOnline = state.online }
        mode = mode ?? state.mode
        missionProgress = missionProgress ?? state.missionProgress
        audio = audio ?? state.audio
        programProgress = programProgress ?? state.programProgress
    }

    deinit { watcher?.cancel() }

    func apply(_ event: RelayEvent) {
        switch event {
        case .connection(let state): connection = state
        case .deviceStatus(let status):
            robotOnline = status.online
            if !status.online, let since = status.since { lastSeen = since }
            if let recovered = status.recovered { lastResumeRecovered = recovered }
        case .event(let message): apply(RobotEvent(message))
        case .settingsChanged(let desired, let reported): settingsVersions = (desired, reported)
        case .message, .binary, .sealedFrameRejected, .sealedHistoryRejected, .timelineChanged: break
        }
    }

    private func apply(_ event: RobotEvent) {
        switch event {
        case .missionProgress(let e): missionProgress = e.model ?? missionProgress
        case .modeChanged(let e): mode = e.model ?? mode
        case .programProgress(let e): programProgress = e.model ?? programProgress
        case .audioState(let e): audio = e.model ?? audio
        case .barkDetected(let e): lastBark = e.model ?? lastBark
        case .dogDetected(let e): lastDog = e.model ?? lastDog
        case .treatDispensed(let e): lastTreat = e.model ?? lastTreat
        case .other: break
        }
    }
}
#endif
