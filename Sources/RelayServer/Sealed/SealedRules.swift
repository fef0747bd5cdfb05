import RelayCore
import RelayCrypto
import RelayStore

/// The sealed household's request bodies, read strictly (docs/protocol.md "The sealed household
/// (v1.5)"). The relay checks what it can without a secret: shapes, sizes, that a `kid` is its
/// keys', and that an uploaded roster is this device's, of this epoch, with one package per
/// member. Signatures are the ends' business: they verify everything the relay hands them.
enum SealedRules {
    /// `{"sign":B64,"hpke":B64}`, 32 bytes each: the app's keys and their `kid`.
    static func memberKey(_ body: [UInt8], appTokenID: Int64) throws(RelayError) -> SealedRepository.MemberKey {
        let usage = #"send {"sign":B64,"hpke":B64}: both raw 32-byte public keys, base64url without padding"#
        guard let json = try? JSONReader.parse(body), case .object = json,
              let sign = json.member("sign")?.stringValue, let signKey = Base64.decodeURLSafe(sign), signKey.count == 32,
              let hpke = json.member("hpke")?.stringValue, let hpkeKey = Base64.decodeURLSafe(hpke), hpkeKey.count == 32
        else { throw RelayError(.badRequest, usage) }
        return .init(appTokenID: appTokenID, kid: kid(sign: signKey, hpke: hpkeKey), sign: sign, hpke: hpke)
    }

    /// The lower-case hex of the first 16 bytes of SHA-256(Ed25519 public ‖ X25519 public).
    static func kid(sign: [UInt8], hpke: [UInt8]) -> String {
        Hex.encode(Array(Crypto.sha256(sign + hpke).prefix(16)))
    }

    /// `{"roster":{"roster":B64,"by":KID,"sig":B64},"robot_sig":B64,"packages":[{"kid","sealed"}…]}`
    /// for epoch `epoch` of `device`.
    static func epochUpload(_ body: [UInt8], device: DeviceID, epoch: Int) throws(RelayError) -> SealedRepository.EpochUpload {
        let usage = #"send {"roster":{"roster":B64,"by":KID,"sig":B64},"robot_sig":B64,"packages":[{"kid":KID,"sealed":B64},…]}"#
        guard let json = try? JSONReader.parse(body), case .object = json, let signed = json.member("roster"),
              let rosterText = signed.member("roster")?.stringValue, let rosterBytes = Base64.decodeURLSafe(rosterText),
              let by = signed.member("by")?.stringValue, isKid(by),
              let signature = signed.member("sig")?.stringValue, Base64.decodeURLSafe(signature)?.count == 64,
              let robotSignature = json.member("robot_sig")?.stringValue, Base64.decodeURLSafe(robotSignature)?.count == 64,
              let items = json.member("packages")?.arrayValue
        else { throw RelayError(.badRequest, usage) }
        var packages: [SealedRepository.Package] = []
        for item in items {
            // The encapsulated key (32 bytes), then the secret (32) and its tag (16).
            guard let kid = item.member("kid")?.stringValue, isKid(kid), let sealed = item.member("sealed")?.stringValue,
                  Base64.decodeURLSafe(sealed)?.count == 80
            else { throw RelayError(.badRequest, "each package is {\"kid\":KID,\"sealed\":B64} of 80 bytes") }
            packages.append(.init(kid: kid, sealed: sealed))
        }
        let members = try rosterMembers(rosterBytes, device: device, epoch: epoch)
        guard Set(packages.map(\.kid)) == members, packages.count == members.count else {
            throw RelayError(.badRequest, "one package for each member of the roster, and none for anyone else")
        }
        return .init(epoch: epoch, roster: rosterText, signedBy: by, signature: signature, robotSignature: robotSignature,
                     packages: packages)
    }

    /// The members' `kid`s of a roster that names this device and epoch.
    private static func rosterMembers(_ bytes: [UInt8], device: DeviceID, epoch: Int) throws(RelayError) -> Set<String> {
        guard let roster = try? JSONReader.parse(bytes), case .object = roster, let items = roster.member("members")?.arrayValue else {
            throw RelayError(.badRequest, "the roster is not the contract's JSON")
        }
        guard roster.member("device_id")?.stringValue == device.rawValue, roster.member("epoch")?.intValue == Int64(epoch) else {
            throw RelayError(.badRequest, "the roster is not of this device and epoch")
        }
        let kids = items.compactMap { $0.member("kid")?.stringValue }.filter(isKid)
        guard kids.count == items.count, Set(kids).count == kids.count, !kids.isEmpty else {
            throw RelayError(.badRequest, "the roster's members need distinct kids")
        }
        return Set(kids)
    }

    private static func isKid(_ text: String) -> Bool {
        text.utf8.count == 32 && text.utf8.allSatisfy { (48...57).contains($0) || (97...102).contains($0) }
    }
}
