import Foundation
import WimzProtocol
import WimzSealed

/// What an app brings to a sealed household (docs/protocol.md "The sealed household (v1.5)"):
/// its identity and the robot's keys as it learned them. Set it as
/// ``RelayClient/Configuration/sealed``; the client then seals what it sends and opens what the
/// robot sealed, once it holds an epoch (``RelayClient/refreshSealedEpoch()``).
public struct SealedHousehold: Sendable {
    /// This app install's keys (keep them with an `IdentityStore`: the Keychain, a 0600 file).
    public var identity: SealedIdentity
    /// The robot's keys, when the app learned them over a path the relay does not control (the
    /// home Wi-Fi, or the household's fingerprint in an invitation link). Nil: the first roster's
    /// robot key is taken, and shown as unverified.
    public var verifiedRobot: PublicKeys?
    /// The robot's verification code from an invitation link (``SealedInvitation``): a roster
    /// naming a robot key that does not match it is refused, one that does is verified.
    public var robotCode: String?
    /// Where the epochs are kept: those kept before are held from the start, and every epoch the
    /// client opens is kept (for the next launch and the Notification Service Extension).
    public var store: (any SealedKeyStore)?

    public init(identity: SealedIdentity, verifiedRobot: PublicKeys? = nil, robotCode: String? = nil) {
        self.identity = identity
        self.verifiedRobot = verifiedRobot
        self.robotCode = robotCode
    }

    /// The identity `store` keeps (made on first use), with `store` keeping the epochs.
    public init(store: any SealedKeyStore, verifiedRobot: PublicKeys? = nil, robotCode: String? = nil) throws {
        self.init(identity: try store.identity(), verifiedRobot: verifiedRobot, robotCode: robotCode)
        self.store = store
    }
}

/// How the app knows the robot's key.
public enum RobotKeyTrust: Sendable, Equatable {
    /// Learned over a path the relay does not control.
    case verified
    /// Learned only through the relay: show it as such until it is verified.
    case unverified
}

/// The sealed household as one client holds it: the epochs whose secrets it opened, the robot's
/// key, and this connection's sealer (a fresh sid for every connection).
struct SealState {
    let household: SealedHousehold
    let deviceID: String
    var opener: AppOpener
    var current: Epoch?
    var robot: PublicKeys?
    /// A robot key a person verified with its code (``RelayClient/verifyRobotKey(code:)``).
    var verifiedByCode: PublicKeys?
    /// Earlier epochs the relay has no package of for this app (it was not a member then, or
    /// they are past the horizon): not asked for again (SealedHistory.swift).
    var unavailableEpochs: Set<Int> = []
    var sealer: FrameSealer
    /// An owner's watch for members to sign out (SealedRosters.swift).
    var departureWatch: Task<Void, Never>?
    /// The last roster this app signed and when, until the robot stores its epoch: a sign-out
    /// waits for it rather than sign a second roster of the same epoch.
    var proposed: (epoch: Int, at: ContinuousClock.Instant)?

    init(_ household: SealedHousehold, deviceID: String) {
        self.household = household
        self.deviceID = deviceID
        opener = AppOpener(deviceID: deviceID)
        robot = household.verifiedRobot
        sealer = FrameSealer(identity: household.identity, deviceID: deviceID)
        for epoch in (try? household.store?.epochs(of: deviceID)) ?? [] { hold(epoch) }
    }

    var trust: RobotKeyTrust? {
        guard let robot else { return nil }
        let codeMatches = household.robotCode.map(robot.matches(verificationCode:)) ?? false
        return robot == household.verifiedRobot || robot == verifiedByCode || codeMatches ? .verified : .unverified
    }

    /// Whether this app is an owner in the current roster.
    var isOwner: Bool {
        current?.roster.members.contains { $0.kid == household.identity.publicKeys.kid && $0.role == .owner } ?? false
    }

    mutating func newConnection() { sealer = FrameSealer(identity: household.identity, deviceID: deviceID) }

    /// Takes the answer of `GET …/sealed/epochs/current`: the robot's acceptance verified with
    /// the key this app holds for it (a roster naming another robot key is refused), the chain
    /// to the roster it held before where it follows it, and its own package opened.
    mutating func adopt(_ object: [String: Any]) throws -> Int {
        let signed = try Self.signedRoster(object)
        let roster = signed.roster
        try check(roster)
        if let current {
            guard roster.epoch >= current.number else { throw SealedError.rosterRejected("an epoch older than the one held") }
            if roster.epoch == current.number { return current.number }
            if roster.epoch == current.number + 1 {
                _ = try signed.verifiedAsNext(after: current.roster, deviceID: deviceID, robot: roster.robot)
            }
        }
        let epoch = try opened(roster, object)
        hold(epoch)
        return epoch.number
    }

    /// An epoch answer's fields, as Foundation's objects (the crypto reads them so).
    static func epochAnswer(_ answer: JSON) throws -> [String: Any] {
        guard let object = try? JSONSerialization.jsonObject(with: Data(answer.text.utf8)) as? [String: Any] else {
            throw SealedError.malformed("not an epoch answer")
        }
        return object
    }

    static func signedRoster(_ object: [String: Any]) throws -> SignedRoster {
        guard let signedJSON = object["roster"] as? [String: Any] else { throw SealedError.malformed("not an epoch answer") }
        return try SignedRoster(json: signedJSON)
    }

    /// A roster from the relay names this device and the robot key this app holds (or the
    /// invitation's code).
    func check(_ roster: Roster) throws {
        guard roster.deviceID == deviceID else { throw SealedError.rosterRejected("another device's roster") }
        if let robot, roster.robot != robot { throw SealedError.rosterRejected("the roster names another robot key") }
        if let code = household.robotCode, !roster.robot.matches(verificationCode: code) {
            throw SealedError.rosterRejected("the roster's robot key does not match the invitation's code")
        }
    }

    /// The epoch of `roster` from the answer's package, once the robot's acceptance verifies.
    func opened(_ roster: Roster, _ object: [String: Any]) throws -> Epoch {
        guard let package = object["package"] as? [String: Any], let robotSignature = object["robot_sig"] as? String else {
            throw SealedError.malformed("not an epoch answer")
        }
        return try Epoch(roster: roster, package: package, robotSignature: robotSignature, identity: household.identity)
    }

    /// Opens `epoch`'s frames from now on, and seals with it when it is the newest held.
    mutating func hold(_ epoch: Epoch) {
        opener.hold(epoch)
        if epoch.number > current?.number ?? 0 {
            current = epoch
            robot = robot ?? epoch.roster.robot
        }
    }
}

extension RelayClient {
    /// Hands this app's public keys to the relay for the device (`PUT …/sealed/member-key`), so
    /// an owner's app can sign it into the next roster. Returns its `kid`.
    public func joinSealedHousehold() async throws -> String {
        guard let household = configuration.sealed else { throw RelayClientError.invalidResponse("no sealed household configured") }
        let keys = household.identity.publicKeys
        let answer = try await deviceCall("PUT", .sealed, ["member-key"],
                                          body: ["sign": .string(Base64URL.encode(keys.sign)), "hpke": .string(Base64URL.encode(keys.hpke))])
        return answer["kid"]?.stringValue ?? ""
    }

    /// Fetches the device's current epoch with this app's package and opens it; from then on the
    /// client seals what it sends. Returns the epoch. Throws `SealedError` when the relay's answer
    /// does not verify (nothing is adopted then), ``RelayClientError`` for a refusal
    /// (`not_in_roster`: an owner has not signed this app in yet).
    @discardableResult
    public func refreshSealedEpoch() async throws -> Int {
        guard seal != nil else { throw RelayClientError.invalidResponse("no sealed household configured") }
        let answer = try SealState.epochAnswer(try await deviceCall("GET", .sealed, ["epochs", "current"]))
        let number = try seal!.adopt(answer)
        if let epoch = seal!.current, epoch.number == number { try keep([epoch]) }
        acceptHistory(answer)
        watchDepartures()
        return number
    }

    /// Holds `epoch` (one this app opened before, kept in its own store): its frames open, and
    /// the client seals with it if it is the newest held. Apps restore their epochs on launch.
    public func restoreSealedEpoch(_ epoch: Epoch) {
        seal?.hold(epoch)
    }

    /// Checks the robot's key against the code the robot shows or speaks (or an invitation link
    /// carries): true, and ``robotKeyTrust`` is `.verified` from then on, when they match.
    @discardableResult
    public func verifyRobotKey(code: String) -> Bool {
        guard let robot = seal?.robot, robot.matches(verificationCode: code) else { return false }
        seal!.verifiedByCode = robot
        return true
    }

    /// The epoch this client seals with (nil: none yet).
    public var sealedEpoch: Int? { seal?.current?.number }

    /// The robot's keys as this client holds them (nil: none yet); see ``robotKeyTrust``.
    public var sealedRobotKeys: PublicKeys? { seal?.robot }

    /// How this client knows the robot's key (nil: it knows none yet).
    public var robotKeyTrust: RobotKeyTrust? { seal?.trust }

    /// The text that goes out for `text`: sealed once the client holds an epoch.
    func outgoing(_ text: String) throws -> String {
        guard let epoch = seal?.current else { return text }
        return try seal!.sealer.seal(Data(text.utf8), in: epoch)
    }

    /// A frame from the relay on a sealed device: the robot's sealed frame opened (with when it
    /// was sealed and whether it is past state), the relay's own unsealed messages as they are,
    /// and nil for anything dropped (reported as ``RelayEvent/sealedFrameRejected(_:)``).
    func unsealed(_ message: JSON, _ text: String) -> (message: JSON, text: String, frame: OpenedFrame?)? {
        guard var state = seal else { return (message, text, nil) }
        let type = message["type"]?.stringValue
        if type == "epoch" {
            // The robot stored a new epoch: fetch this app's package of it.
            if let number = message["epoch"]?.intValue, number > state.current?.number ?? 0 {
                Task { try? await self.refreshSealedEpoch() }
            }
            return nil
        }
        guard state.current != nil else { return (message, text, nil) }
        defer { seal = state }
        guard type == "sealed" else {
            // The relay's own: its events, errors, pongs. Anything else would be a relay
            // speaking for the robot.
            let relayEvents = [WimzProtocol.RelayEventName.deviceStatus, WimzProtocol.RelayEventName.turnCredentials]
            let relayEvent = type == "event" && relayEvents.contains(message["event"]?.stringValue ?? "")
            if relayEvent || type == "error" || type == "pong" { return (message, text, nil) }
            if type == "lock_screen" { return nil }  // the relay's input for the lock screen; the sealed event says it all
            eventSink.yield(.sealedFrameRejected(.malformed))
            return nil
        }
        do {
            switch try state.opener.open(Data(text.utf8)) {
            case .repeated: return nil
            case .opened(let frame):
                let inner = String(decoding: frame.plaintext, as: UTF8.self)
                guard let innerMessage = try? JSON(parsing: inner) else { throw FrameRejection.malformed }
                return (innerMessage, inner, frame)
            }
        } catch let rejection as FrameRejection {
            eventSink.yield(.sealedFrameRejected(rejection))
        } catch {
            eventSink.yield(.sealedFrameRejected(.malformed))
        }
        return nil
    }
}

extension RelayClient {
    /// `state` with its sealed entries opened (the relay keeps the robot's frames as they came).
    func opened(_ state: LastKnownState) -> LastKnownState {
        guard let seal, seal.current != nil else { return state }
        var opener = seal.opener.forgettingOpened, state = state
        for (name, known) in state.events where (try? JSON(parsing: known.message.raw))?["type"]?.stringValue == "sealed" {
            state.events[name] = nil
            do {
                guard case .opened(let frame) = try opener.open(Data(known.message.raw.utf8)) else { continue }
                let inner = String(decoding: frame.plaintext, as: UTF8.self)
                guard case .event(let message) = RelayEvent(message: try JSON(parsing: inner), raw: inner).sealed(frame) else { continue }
                state.events[name] = LastKnownState.KnownEvent(message: message, receivedAt: known.receivedAt)
            } catch {
                eventSink.yield(.sealedFrameRejected(error as? FrameRejection ?? .malformed))
            }
        }
        return state
    }
}

extension RelayEvent {
    /// This event as opened from a sealed frame: an event carries when it was sealed and whether
    /// it is past state.
    func sealed(_ frame: OpenedFrame?) -> RelayEvent {
        guard let frame, case .event(var message) = self else { return self }
        message.sealedAt = frame.ts
        message.isPastState = frame.isPastState
        return .event(message)
    }
}
