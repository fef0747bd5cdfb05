import Crypto
import Foundation

/// The sealed frame's parts (docs/protocol.md "The sealed household (v1.5)"), shared by the sealer and
/// the opener: the associated data, the per-connection key, the nonce.
enum FrameCrypto {
    /// `wimz-sealed-v1` 0x00 device 0x00 E 0x00 KID 0x00 SID 0x00 N 0x00 MS 0x00 K (K empty when absent).
    static func associatedData(deviceID: String, epoch: Int, kid: String, sid: String, n: Int64, ts: Int64, kind: String?) -> Data {
        Data(["wimz-sealed-v1", deviceID, String(epoch), kid, sid, String(n), String(ts), kind ?? ""].joined(separator: "\0").utf8)
    }

    /// HKDF-SHA256(the epoch secret, salt = the sid's 16 bytes, `wimz-sealed-v1 frame` 0x00 device 0x00 KID).
    static func key(_ epoch: Epoch, sid: Data, deviceID: String, kid: String) -> SymmetricKey {
        HKDF<SHA256>.deriveKey(inputKeyMaterial: epoch.secret, salt: sid,
                               info: Data(["wimz-sealed-v1 frame", deviceID, kid].joined(separator: "\0").utf8), outputByteCount: 32)
    }

    /// 4 zero bytes, then `n` as 8 bytes big-endian.
    static func nonce(_ n: Int64) throws -> ChaChaPoly.Nonce {
        try ChaChaPoly.Nonce(data: Data(repeating: 0, count: 4) + withUnsafeBytes(of: UInt64(n).bigEndian) { Data($0) })
    }
}

/// One connection's sealing: a fresh `sid` and `n` from 1, so no key and nonce ever repeat.
/// Make a new one for every connection.
public struct FrameSealer: Sendable {
    public let identity: SealedIdentity
    public let deviceID: String
    /// The connection's 16 random bytes, base64url.
    public let sid: String
    private let sidBytes: Data
    /// The last `n` sealed.
    public private(set) var n: Int64
    /// This connection's frame key in each epoch it sealed in (derived once, not per frame).
    private var keys: [Int: SymmetricKey] = [:]

    public init(identity: SealedIdentity, deviceID: String) {
        self.init(identity: identity, deviceID: deviceID, sid: SymmetricKey(size: .bits128).withUnsafeBytes { Data($0) }, after: 0)
    }

    /// A sealer that continues a known connection (the contract's test vectors).
    init(identity: SealedIdentity, deviceID: String, sid: Data, after n: Int64) {
        (self.identity, self.deviceID, self.sidBytes, self.n) = (identity, deviceID, sid, n)
        self.sid = Base64URL.encode(sid)
    }

    /// The sealed frame carrying `plaintext` (the v1–v1.4 frame's exact bytes), as JSON text.
    public mutating func seal(_ plaintext: Data, in epoch: Epoch, ts: Int64 = Int64(Date().timeIntervalSince1970 * 1000)) throws -> String {
        try seal(plaintext, in: epoch, ts: ts, kind: nil)
    }

    /// A settings document (v1.6): `plaintext` is `{"type":"settings","version":V,"doc":{…}}`
    /// for the version it is written as, sealed with kind `settings`.
    public mutating func sealSettings(_ plaintext: Data, in epoch: Epoch) throws -> String {
        try seal(plaintext, in: epoch, ts: Int64(Date().timeIntervalSince1970 * 1000), kind: AppOpener.settingsKind)
    }

    /// With a `kind`, as only the robot's library seals (a robot stand-in's frames in tests).
    mutating func seal(_ plaintext: Data, in epoch: Epoch, ts: Int64, kind: String?) throws -> String {
        n += 1
        let kid = identity.kid
        let aad = FrameCrypto.associatedData(deviceID: deviceID, epoch: epoch.number, kid: kid, sid: sid, n: n, ts: ts, kind: kind)
        let key = keys[epoch.number] ?? FrameCrypto.key(epoch, sid: sidBytes, deviceID: deviceID, kid: kid)
        keys[epoch.number] = key
        let box = try ChaChaPoly.seal(plaintext, using: key,
                                      nonce: try FrameCrypto.nonce(n), authenticating: aad)
        let ct = box.ciphertext + box.tag
        let sig = try identity.sign(aad + ct)
        // Every value is a number or base64url/hex text: nothing to escape.
        let kindField = kind.map { #""kind":"\#($0)","# } ?? ""
        return #"{"type":"sealed","v":1,"epoch":\#(epoch.number),"kid":"\#(kid)","sid":"\#(sid)","n":\#(n),"ts":\#(ts),"#
            + #"\#(kindField)"ct":"\#(Base64URL.encode(ct))","sig":"\#(Base64URL.encode(sig))"}"#
    }
}
