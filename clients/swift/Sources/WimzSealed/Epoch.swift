import Crypto
import Foundation

/// One epoch as an app holds it: the roster the robot accepted and the secret it sealed to this
/// app (HPKE, RFC 9180 base mode, DHKEM(X25519, HKDF-SHA256), HKDF-SHA256, AES-128-GCM).
public struct Epoch: Sendable {
    public let roster: Roster
    let secret: SymmetricKey

    public var number: Int { roster.epoch }

    /// An epoch whose secret this end already holds (restored from the store, or a test's).
    public init(roster: Roster, secret: Data) throws {
        guard secret.count == 32 else { throw SealedError.packageRejected("the epoch secret is not 32 bytes") }
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

    static let suite = HPKE.Ciphersuite(kem: .Curve25519_HKDF_SHA256, kdf: .HKDF_SHA256, aead: .AES_GCM_128)

    /// `label` 0x00 device 0x00 E 0x00 roster hash: HPKE's `info` and what `robot_sig` signs.
    static func statement(_ label: String, _ roster: Roster) -> Data {
        Data([label, roster.deviceID, String(roster.epoch), roster.hash].joined(separator: "\0").utf8)
    }
}
