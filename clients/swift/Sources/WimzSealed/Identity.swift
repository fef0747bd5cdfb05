import Crypto
import Foundation

/// A member's (or the robot's) public half: its Ed25519 key that signs, its X25519 key that epoch
/// secrets are sealed to, and its `kid`.
public struct PublicKeys: Sendable, Hashable {
    /// The raw 32-byte Ed25519 public key.
    public let sign: Data
    /// The raw 32-byte X25519 public key.
    public let hpke: Data

    public init(sign: Data, hpke: Data) throws {
        guard sign.count == 32, hpke.count == 32 else { throw SealedError.malformed("a public key is not 32 bytes") }
        self.sign = sign
        self.hpke = hpke
    }

    /// The first 16 bytes of SHA-256(Ed25519 public ‖ X25519 public), lower-case hex.
    public var kid: String { Hex.string(SHA256.hash(data: sign + hpke).prefix(16)) }

    /// What a robot shows or speaks so that a person can check its key on the phone, over no path
    /// the relay controls (and what an invitation link carries): 80 bits of
    /// SHA-256(`wimz-sealed-v1 verify` 0x00 ‖ both public keys), base32 in four groups of four.
    public var verificationCode: String {
        let bits = Array(SHA256.hash(data: Data("wimz-sealed-v1 verify\0".utf8) + sign + hpke).prefix(10))
        let alphabet = Array("ABCDEFGHIJKLMNOPQRSTUVWXYZ234567")
        // 80 bits are 16 base32 digits exactly: 5 bits each, most significant first.
        let digits = (0..<16).map { k -> Character in
            let bit = k * 5
            let window = (UInt16(bits[bit / 8]) << 8 | UInt16(bit / 8 + 1 < bits.count ? bits[bit / 8 + 1] : 0)) >> (11 - bit % 8)
            return alphabet[Int(window & 31)]
        }
        return stride(from: 0, to: 16, by: 4).map { String(digits[$0..<$0 + 4]) }.joined(separator: "-")
    }

    /// Whether `code` (as a person typed or read it: any case, dashes and spaces optional) is this key's.
    public func matches(verificationCode code: String) -> Bool {
        let typed = code.uppercased().filter { $0 != "-" && $0 != " " }
        return typed == verificationCode.filter { $0 != "-" }
    }

    /// Whether `signature` is this key's Ed25519 signature of `message`.
    public func verifies(_ signature: Data, of message: Data) -> Bool {
        guard let key = try? Curve25519.Signing.PublicKey(rawRepresentation: sign) else { return false }
        return key.isValidSignature(signature, for: message)
    }

    var hpkeKey: Curve25519.KeyAgreement.PublicKey {
        get throws { try Curve25519.KeyAgreement.PublicKey(rawRepresentation: hpke) }
    }
}

/// An app install's own keys, made on first use. The private halves leave only into an
/// `IdentityStore` (the Keychain on Apple platforms, a 0600 file elsewhere).
public struct SealedIdentity: Sendable {
    let signing: Curve25519.Signing.PrivateKey
    let agreement: Curve25519.KeyAgreement.PrivateKey
    /// Both public keys and the `kid`.
    public let publicKeys: PublicKeys

    /// A new identity.
    public init() {
        self.init(signing: .init(), agreement: .init())
    }

    /// The identity of these raw private keys (32 bytes each).
    public init(signingKey: Data, agreementKey: Data) throws {
        self.init(signing: try .init(rawRepresentation: signingKey), agreement: try .init(rawRepresentation: agreementKey))
    }

    private init(signing: Curve25519.Signing.PrivateKey, agreement: Curve25519.KeyAgreement.PrivateKey) {
        self.signing = signing
        self.agreement = agreement
        // A freshly made or restored key's public half is 32 bytes by construction.
        publicKeys = try! PublicKeys(sign: signing.publicKey.rawRepresentation, hpke: agreement.publicKey.rawRepresentation)
    }

    public var kid: String { publicKeys.kid }

    func sign(_ message: Data) throws -> Data { try signing.signature(for: message) }

    /// The raw private keys, for an `IdentityStore` only.
    var privateKeys: (signing: Data, agreement: Data) { (signing.rawRepresentation, agreement.rawRepresentation) }
}

/// Lower-case hex.
enum Hex {
    static func string<Bytes: Sequence>(_ bytes: Bytes) -> String where Bytes.Element == UInt8 {
        bytes.map { String(format: "%02x", $0) }.joined()
    }
}
