import Crypto
import Foundation

/// One epoch as an app holds it: the roster the robot accepted and the secret it sealed to this
/// app (HPKE, RFC 9180 base mode, DHKEM(X25519, HKDF-SHA256), HKDF-SHA256, AES-128-GCM) — or an
/// earlier epoch's secret an owner shared with this member (v1.6 history), held under the roster
/// the grant came with, whose robot key its frames are checked against.
public struct Epoch: Sendable {
    public let number: Int
    /// The epoch's roster; for a granted epoch, the later roster the grant was verified under.
    public let roster: Roster
    let secret: SymmetricKey

    /// Opened from an owner's history grant rather than from this member's own package: its
    /// frames are read, never sealed with.
    public var isGranted: Bool { number != roster.epoch }

    /// An epoch whose secret this end already holds (restored from the store, or a test's).
    /// `number`: a granted epoch's own (nil: the roster's).
    public init(roster: Roster, secret: Data, number: Int? = nil) throws {
        guard secret.count == 32 else { throw SealedError.packageRejected("the epoch secret is not 32 bytes") }
        self.number = number ?? roster.epoch
        self.roster = roster
        self.secret = SymmetricKey(data: secret)
    }

    /// The epoch of `roster`, from this end's package `{"kid","sealed"}` and the robot's
    /// signature that it accepted the roster.
    public init(roster: Roster, package: [String: Any], robotSignature: String, identity: SealedIdentity) throws {
        guard let signature = Base64URL.decode(robotSignature),
              roster.robot.verifies(signature, of: Epoch.statement("wimz-sealed-v1 accept", roster))
        else { throw SealedError.notAcceptedByRobot }
        guard package["kid"] as? String == identity.kid, let text = package["sealed"] as? String,
              let sealed = Base64URL.decode(text), sealed.count > 32
        else { throw SealedError.packageRejected("not this end's package") }
        let secret: Data
        do {
            var recipient = try HPKE.Recipient(privateKey: identity.agreement, ciphersuite: Epoch.suite,
                                               info: Epoch.statement("wimz-sealed-v1 epoch", roster),
                                               encapsulatedKey: sealed.prefix(32))
            secret = try recipient.open(sealed.dropFirst(32))
        } catch {
            throw SealedError.packageRejected("the package does not open")
        }
        try self.init(roster: roster, secret: secret)
    }

    /// The secret's bytes, for the app's own store (the Keychain) only.
    public var secretBytes: Data { secret.withUnsafeBytes { Data($0) } }

    /// A member's package of `secret` for `roster`, as the robot seals it (a robot written in
    /// Swift; this library's tests play the robot with it).
    static func package(_ secret: Data, for member: RosterMember, in roster: Roster) throws -> [String: String] {
        var sender = try HPKE.Sender(recipientKey: try member.keys.hpkeKey, ciphersuite: suite,
                                     info: statement("wimz-sealed-v1 epoch", roster))
        let sealed = try sender.seal(secret)
        return ["kid": member.kid, "sealed": Base64URL.encode(sender.encapsulatedKey + sealed)]
    }

    /// The robot's acceptance of `roster`: its signature of `wimz-sealed-v1 accept` 0x00 device 0x00 E 0x00 hash.
    static func acceptance(of roster: Roster, by robot: SealedIdentity) throws -> String {
        Base64URL.encode(try robot.sign(statement("wimz-sealed-v1 accept", roster)))
    }

    static let suite = HPKE.Ciphersuite(kem: .Curve25519_HKDF_SHA256, kdf: .HKDF_SHA256, aead: .AES_GCM_128)

    /// `label` 0x00 device 0x00 E 0x00 roster hash: HPKE's `info` and what `robot_sig` signs.
    static func statement(_ label: String, _ roster: Roster) -> Data {
        Data([label, roster.deviceID, String(roster.epoch), roster.hash].joined(separator: "\0").utf8)
    }
}
