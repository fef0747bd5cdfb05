import Crypto
import Foundation

/// Why an app dropped a sealed frame unread: each is an event its UI can show.
public enum FrameRejection: Error, Sendable, Equatable, Codable {
    /// Not a sealed frame of the contract's shape.
    case malformed
    /// An epoch whose secret this app does not hold (it was not a member then).
    case unknownEpoch(Int)
    /// Sealed by someone other than the robot of that epoch's roster.
    case notTheRobot(kid: String)
    /// The signature or the AEAD does not verify: changed on the way.
    case tampered
    /// A settings document (v1.6) under another version than the one sealed inside it: an old
    /// document handed out as a new one.
    case wrongVersion
}

/// A frame from the robot that passed every check.
public struct OpenedFrame: Sendable, Equatable {
    /// The v1–v1.4 frame's exact bytes.
    public let plaintext: Data
    public let epoch: Int
    /// The robot's clock when it sealed the frame, ms since 1970: show "as of" this.
    public let ts: Int64
    public let kind: String?
    /// Older than 120 s, or older than a frame of the same kind already opened: past state (a
    /// missed event, a replayed status), never a fresh alert.
    public let isPastState: Bool
}

/// The app's checks on the robot's frames: the KID is the robot's in that epoch's roster, the
/// epoch's secret is held (any age: missed events and pushes arrive late by design), each
/// (sid, n) is opened once, the signature and the AEAD verify.
public struct AppOpener: Sendable {
    public enum Outcome: Sendable, Equatable {
        case opened(OpenedFrame)
        /// A (sid, n) already opened: dropped silently.
        case repeated
    }

    /// A frame's ts this far behind the app's clock is past state (ms).
    public static let freshWindow: Int64 = 120_000
    /// Connections (sids) whose opened `n`s are remembered; the oldest is forgotten first.
    static let rememberedSids = 256
    /// Opened `n`s of one sid remembered above the highest run opened without a gap.
    static let numbersAboveGap = 4096

    public let deviceID: String
    private var epochs: [Int: Epoch] = [:]
    private var opened: [String: OpenedNumbers] = [:]
    private var sidOrder: [String] = []
    private var newestByKind: [String: Int64] = [:]
    /// Frame keys by epoch and sid, derived once per connection of the robot (kept with the sid).
    private var keys: [String: [Int: SymmetricKey]] = [:]

    public init(deviceID: String) { self.deviceID = deviceID }

    /// Opens frames of `epoch` from now on (an app keeps the secrets of every epoch it was in).
    public mutating func hold(_ epoch: Epoch) { epochs[epoch.number] = epoch }

    public var heldEpochs: [Int] { epochs.keys.sorted() }

    /// The epochs held, oldest first.
    public var held: [Epoch] { epochs.values.sorted { $0.number < $1.number } }

    /// The rosters of the epochs held as a member (not those of granted ones), oldest first.
    public var heldRosters: [Roster] { epochs.values.filter { !$0.isGranted }.map(\.roster).sorted { $0.epoch < $1.epoch } }

    /// An opener of the same epochs that has opened nothing yet: for frames read again on
    /// purpose (the last-known state), which the live stream's memory would call repeats.
    public var forgettingOpened: AppOpener {
        var fresh = AppOpener(deviceID: deviceID)
        fresh.epochs = epochs
        return fresh
    }

    /// Opens a sealed frame's JSON text; throws `FrameRejection` when it is dropped unread.
    public mutating func open(_ text: Data, now: Int64 = Int64(Date().timeIntervalSince1970 * 1000)) throws -> Outcome {
        let frame = try ParsedFrame(text)
        guard let epoch = epochs[frame.epoch] else { throw FrameRejection.unknownEpoch(frame.epoch) }
        guard frame.kid == epoch.roster.robot.kid else { throw FrameRejection.notTheRobot(kid: frame.kid) }
        if opened[frame.sid]?.contains(frame.n) == true { return .repeated }
        let key = keys[frame.sid]?[frame.epoch] ?? FrameCrypto.key(epoch, sid: frame.sidBytes, deviceID: deviceID, kid: frame.kid)
        let plaintext = try frame.opened(signedBy: epoch.roster.robot, key: key, deviceID: deviceID)
        keys[frame.sid, default: [:]][frame.epoch] = key
        remember(frame.sid, frame.n)
        var past = now - frame.ts > Self.freshWindow
        if let kind = frame.kind {
            past = past || frame.ts < newestByKind[kind, default: .min]
            newestByKind[kind] = max(newestByKind[kind, default: .min], frame.ts)
        }
        return .opened(OpenedFrame(plaintext: plaintext, epoch: frame.epoch, ts: frame.ts, kind: frame.kind, isPastState: past))
    }

    /// A sealed settings document (v1.6, kind `settings`): the desired one an app of the roster
    /// sealed, or the one the robot reports it runs. It opens at any age (settings wait while the
    /// robot is away) and is not a live frame: no replay memory, no past state. Returns the
    /// plaintext and who sealed it; the version check inside is the caller's.
    public func openSettings(_ text: Data) throws -> (plaintext: Data, kid: String) {
        let frame = try ParsedFrame(text)
        guard frame.kind == Self.settingsKind else { throw FrameRejection.malformed }
        guard let epoch = epochs[frame.epoch] else { throw FrameRejection.unknownEpoch(frame.epoch) }
        let robot = epoch.roster.robot
        guard let signer = frame.kid == robot.kid ? robot : epoch.roster.member(frame.kid)?.keys else {
            throw FrameRejection.notTheRobot(kid: frame.kid)
        }
        let key = FrameCrypto.key(epoch, sid: frame.sidBytes, deviceID: deviceID, kid: frame.kid)
        return (try frame.opened(signedBy: signer, key: key, deviceID: deviceID), frame.kid)
    }

    /// The kind of a sealed settings document.
    public static let settingsKind = "settings"

    private mutating func remember(_ sid: String, _ n: Int64) {
        if opened[sid] == nil {
            sidOrder.append(sid)
            if sidOrder.count > Self.rememberedSids {
                let forgotten = sidOrder.removeFirst()
                opened[forgotten] = nil
                keys[forgotten] = nil
            }
        }
        opened[sid, default: OpenedNumbers()].insert(n)
    }
}

/// The `n`s opened of one sid, in little memory however long the connection: every n up to
/// `contiguous` (frames come in order, mostly), and the ones above a gap (missed events fill it
/// later, when they are replayed). Past `AppOpener.numbersAboveGap` of those, the gap is given up
/// on: a frame from it would be a day-old missed event, and is taken for a repeat.
struct OpenedNumbers {
    private(set) var contiguous: Int64 = 0
    private(set) var aboveGap: Set<Int64> = []

    func contains(_ n: Int64) -> Bool { n <= contiguous || aboveGap.contains(n) }

    mutating func insert(_ n: Int64) {
        guard n > contiguous else { return }
        aboveGap.insert(n)
        while aboveGap.remove(contiguous + 1) != nil { contiguous += 1 }
        if aboveGap.count > AppOpener.numbersAboveGap, let lowest = aboveGap.min() {
            contiguous = lowest
            aboveGap.remove(lowest)
            while aboveGap.remove(contiguous + 1) != nil { contiguous += 1 }
        }
    }
}

/// A sealed frame's fields, each of its type.
struct ParsedFrame {
    let epoch: Int, kid: String, sid: String, sidBytes: Data, n: Int64, ts: Int64, kind: String?, ct: Data, sig: Data

    private struct Wire: Decodable {
        let type: String, v: Int, epoch: Int, kid: String, sid: String, n: Int64, ts: Int64, kind: String?, ct: String, sig: String
    }

    init(_ text: Data) throws {
        guard let wire = try? JSONDecoder().decode(Wire.self, from: text), wire.type == "sealed", wire.v == 1, wire.n >= 1,
              let sidBytes = Base64URL.decode(wire.sid), sidBytes.count == 16,
              let ct = Base64URL.decode(wire.ct), let sig = Base64URL.decode(wire.sig)
        else { throw FrameRejection.malformed }
        (epoch, kid, sid, self.sidBytes, n, ts, kind) = (wire.epoch, wire.kid, wire.sid, sidBytes, wire.n, wire.ts, wire.kind)
        (self.ct, self.sig) = (ct, sig)
    }

    /// The plaintext, once `signer`'s signature and the AEAD under `key` verify.
    func opened(signedBy signer: PublicKeys, key: SymmetricKey, deviceID: String) throws -> Data {
        let aad = FrameCrypto.associatedData(deviceID: deviceID, epoch: epoch, kid: kid, sid: sid, n: n, ts: ts, kind: kind)
        guard ct.count >= 16, signer.verifies(sig, of: aad + ct) else { throw FrameRejection.tampered }
        do {
            let box = try ChaChaPoly.SealedBox(nonce: try FrameCrypto.nonce(n), ciphertext: ct.dropLast(16), tag: ct.suffix(16))
            return try ChaChaPoly.open(box, using: key, authenticating: aad)
        } catch {
            throw FrameRejection.tampered
        }
    }
}
