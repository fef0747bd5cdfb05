import Crypto
import Foundation

/// An owner's share of earlier history with a family member (docs/protocol.md v1.6 "History for a
/// newcomer"): each epoch secret the owner holds, sealed with HPKE to the member's X25519 key
/// (`info` = `wimz-sealed-v1 history` 0x00 device 0x00 E 0x00 the member's kid), in the grant
/// `{"device_id","kid","epochs":[{"epoch":E,"sealed":B64}…]}`, whose exact bytes the owner signs.
/// The relay checks the signature against the current roster's owners and hands the grant to that
/// member only; the member's app checks it again under a roster it holds before it opens anything.
public struct HistoryGrant: Sendable, Equatable {
    /// The grant's exact bytes.
    public let grant: Data
    /// The signing owner's kid.
    public let by: String
    /// Ed25519 over `grant`.
    public let signature: Data

    /// The wire's `{"grant":B64,"by":KID,"sig":B64}`.
    public var json: [String: String] {
        ["grant": Base64URL.encode(grant), "by": by, "sig": Base64URL.encode(signature)]
    }

    /// `epochs` (those the owner holds) sealed to `member` and signed by `owner`.
    public static func make(deviceID: String, for member: RosterMember, epochs: [Epoch], by owner: SealedIdentity) throws -> HistoryGrant {
        let sealed = try epochs.sorted { $0.number < $1.number }.map { epoch in
            var sender = try HPKE.Sender(recipientKey: try member.keys.hpkeKey, ciphersuite: Epoch.suite,
                                         info: info(deviceID: deviceID, epoch: epoch.number, kid: member.kid))
            let box = try sender.seal(epoch.secretBytes)
            return Body.Item(epoch: epoch.number, sealed: Base64URL.encode(sender.encapsulatedKey + box))
        }
        let grant = try JSONEncoder().encode(Body(device_id: deviceID, kid: member.kid, epochs: sealed))
        return HistoryGrant(grant: grant, by: owner.kid, signature: try owner.sign(grant))
    }

    /// The grant of an epoch answer's `"history"`, or nil when there is none.
    public init?(json: [String: Any]?) throws {
        guard let json else { return nil }
        guard let grant = (json["grant"] as? String).flatMap(Base64URL.decode), let by = json["by"] as? String,
              let signature = (json["sig"] as? String).flatMap(Base64URL.decode)
        else { throw SealedError.malformed("a history grant is not {grant, by, sig}") }
        self.init(grant: grant, by: by, signature: signature)
    }

    public init(grant: Data, by: String, signature: Data) {
        (self.grant, self.by, self.signature) = (grant, by, signature)
    }

    /// The epochs this grant hands `identity`, each opened: only when an owner of one of `rosters`
    /// (rosters the member holds, all verified) signed it, for this device and this member. They
    /// are held under `current` (the newest roster held: its robot key checks their frames); an
    /// epoch from `current`'s on is the member's own, and is left out.
    public func open(deviceID: String, identity: SealedIdentity, rosters: [Roster], current: Roster) throws -> [Epoch] {
        let signers = rosters.compactMap { $0.member(by) }.filter { $0.role == .owner }
        guard signers.contains(where: { $0.keys.verifies(signature, of: grant) }) else {
            throw SealedError.packageRejected("the history grant is not signed by an owner of a roster this app holds")
        }
        guard let body = try? JSONDecoder().decode(Body.self, from: grant), body.device_id == deviceID, body.kid == identity.kid else {
            throw SealedError.packageRejected("the history grant is not this member's of this device")
        }
        return try body.epochs.filter { $0.epoch < current.epoch }.map { item in
            guard let sealed = Base64URL.decode(item.sealed), sealed.count > 32 else {
                throw SealedError.packageRejected("epoch \(item.epoch) of the history grant is not B64")
            }
            let secret: Data
            do {
                var recipient = try HPKE.Recipient(privateKey: identity.agreement, ciphersuite: Epoch.suite,
                                                   info: Self.info(deviceID: deviceID, epoch: item.epoch, kid: identity.kid),
                                                   encapsulatedKey: sealed.prefix(32))
                secret = try recipient.open(sealed.dropFirst(32))
            } catch {
                throw SealedError.packageRejected("epoch \(item.epoch) of the history grant does not open")
            }
            return try Epoch(roster: current, secret: secret, number: item.epoch)
        }
    }

    static func info(deviceID: String, epoch: Int, kid: String) -> Data {
        Data(["wimz-sealed-v1 history", deviceID, String(epoch), kid].joined(separator: "\0").utf8)
    }

    private struct Body: Codable {
        struct Item: Codable {
            let epoch: Int
            let sealed: String
        }
        let device_id: String
        let kid: String
        let epochs: [Item]
    }
}
