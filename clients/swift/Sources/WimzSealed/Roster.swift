import Crypto
import Foundation

/// One member of a roster: keys, role, whether a guest may steer the robot, its end, a label.
public struct RosterMember: Sendable, Equatable {
    public enum Role: String, Sendable, Codable, CaseIterable { case owner, family, guest }

    public let keys: PublicKeys
    public let role: Role
    public let control: Bool
    /// The member's end, ms since 1970 (nil: none).
    public let until: Int64?
    public let label: String

    public init(keys: PublicKeys, role: Role, control: Bool, until: Int64?, label: String) {
        (self.keys, self.role, self.control, self.until, self.label) = (keys, role, control, until, label)
    }

    public var kid: String { keys.kid }
    /// Owners and family always steer the robot; a guest only with `control` (as v1.3).
    public var mayControl: Bool { role != .guest || control }
}

/// Which Live Activity words the relay may see for a sealed device.
public enum LockScreenPolicy: String, Sendable, Codable { case off, status, full }

/// One epoch's household as an owner signed it. `raw` is the exact signed bytes: nobody
/// re-serialises a roster, and its hash is SHA-256 of those bytes.
public struct Roster: Sendable, Equatable {
    public let deviceID: String
    public let epoch: Int
    /// The previous roster's hash (nil for epoch 1).
    public let previousHash: String?
    /// When it was made, ms since 1970.
    public let made: Int64
    public let robot: PublicKeys
    public let members: [RosterMember]
    public let lockScreen: LockScreenPolicy
    public let raw: Data

    /// SHA-256 of the exact bytes, lower-case hex.
    public var hash: String { Hex.string(SHA256.hash(data: raw)) }

    public func member(_ kid: String) -> RosterMember? { members.first { $0.kid == kid } }

    /// A new roster, serialised once (an owner's app, before it signs).
    public static func make(deviceID: String, epoch: Int, previousHash: String?, made: Int64, robot: PublicKeys,
                            members: [RosterMember], lockScreen: LockScreenPolicy = .status) throws -> Roster {
        let body = Body(device_id: deviceID, epoch: epoch, prev: previousHash, made: made, robot: .init(robot),
                        members: members.map(Body.Member.init), lock_screen: lockScreen)
        return try parse(JSONEncoder().encode(body))
    }

    /// The roster in `raw`, checked for shape (a signature is `verifyNext`'s business).
    public static func parse(_ raw: Data) throws -> Roster {
        let body: Body
        do { body = try JSONDecoder().decode(Body.self, from: raw) } catch { throw SealedError.rosterRejected("malformed roster") }
        let members = try body.members.map { item in
            RosterMember(keys: try item.keys.checked(), role: item.role, control: item.control, until: item.until, label: item.label ?? "")
        }
        guard body.epoch >= 1, Set(members.map(\.kid)).count == members.count, members.contains(where: { $0.role == .owner })
        else { throw SealedError.rosterRejected("malformed roster: epoch, a member twice, or no owner") }
        return Roster(deviceID: body.device_id, epoch: body.epoch, previousHash: body.prev, made: body.made,
                      robot: try body.robot.checked(), members: members, lockScreen: body.lock_screen ?? .status, raw: raw)
    }

    /// This roster signed by `owner`.
    public func signed(by owner: SealedIdentity) throws -> SignedRoster {
        SignedRoster(roster: self, by: owner.kid, signature: try owner.sign(raw))
    }

    /// The wire's field names, written with explicit nulls as the contract shows them.
    struct Body: Codable {
        struct Keys: Codable {
            let kid: String, sign: String, hpke: String
            init(_ keys: PublicKeys) { (kid, sign, hpke) = (keys.kid, Base64URL.encode(keys.sign), Base64URL.encode(keys.hpke)) }
            func checked() throws -> PublicKeys {
                guard let sign = Base64URL.decode(sign), let hpke = Base64URL.decode(hpke) else { throw SealedError.rosterRejected("malformed key") }
                let keys = try PublicKeys(sign: sign, hpke: hpke)
                guard keys.kid == kid else { throw SealedError.rosterRejected("a kid is not its keys'") }
                return keys
            }
        }
        struct Member: Codable {
            let keys: Keys, role: RosterMember.Role, control: Bool, until: Int64?, label: String?
            init(_ member: RosterMember) {
                (keys, role, control, until, label) = (.init(member.keys), member.role, member.control, member.until, member.label)
            }
            enum CodingKeys: String, CodingKey { case role, control, until, label }
            init(from decoder: Decoder) throws {
                keys = try Keys(from: decoder)
                let c = try decoder.container(keyedBy: CodingKeys.self)
                role = try c.decode(RosterMember.Role.self, forKey: .role)
                control = try c.decode(Bool.self, forKey: .control)
                until = try c.decodeIfPresent(Int64.self, forKey: .until)
                label = try c.decodeIfPresent(String.self, forKey: .label)
            }
            func encode(to encoder: Encoder) throws {
                try keys.encode(to: encoder)
                var c = encoder.container(keyedBy: CodingKeys.self)
                try c.encode(role, forKey: .role)
                try c.encode(control, forKey: .control)
                try c.encode(until, forKey: .until)
                try c.encode(label ?? "", forKey: .label)
            }
        }
        let device_id: String, epoch: Int, prev: String?, made: Int64, robot: Keys, members: [Member]
        let lock_screen: LockScreenPolicy?
        enum CodingKeys: String, CodingKey { case device_id, epoch, prev, made, robot, members, lock_screen }
        func encode(to encoder: Encoder) throws {
            var c = encoder.container(keyedBy: CodingKeys.self)
            try c.encode(device_id, forKey: .device_id)
            try c.encode(epoch, forKey: .epoch)
            try c.encode(prev, forKey: .prev)
            try c.encode(made, forKey: .made)
            try c.encode(robot, forKey: .robot)
            try c.encode(members, forKey: .members)
            try c.encode(lock_screen ?? .status, forKey: .lock_screen)
        }
    }
}

/// `{"roster":B64,"by":KID,"sig":B64}`: a roster and an owner's Ed25519 signature of its bytes.
public struct SignedRoster: Sendable, Equatable {
    public let roster: Roster
    public let by: String
    public let signature: Data

    public init(roster: Roster, by: String, signature: Data) {
        (self.roster, self.by, self.signature) = (roster, by, signature)
    }

    public init(json: [String: Any]) throws {
        guard let text = json["roster"] as? String, let raw = Base64URL.decode(text), let by = json["by"] as? String,
              let sigText = json["sig"] as? String, let signature = Base64URL.decode(sigText)
        else { throw SealedError.rosterRejected("malformed signed roster") }
        self.init(roster: try Roster.parse(raw), by: by, signature: signature)
    }

    public var json: [String: String] {
        ["roster": Base64URL.encode(roster.raw), "by": by, "sig": Base64URL.encode(signature)]
    }

    /// The roster of the next epoch when every rule holds: this device, this robot's keys; epoch 1
    /// without `prev`, signed by the pinned first owner who is an owner in it; later epochs one
    /// above `previous`, chained to its hash, signed by an owner of `previous`.
    public func verifiedAsNext(after previous: Roster?, deviceID: String, robot: PublicKeys,
                               firstOwner: PublicKeys? = nil) throws -> Roster {
        guard roster.deviceID == deviceID else { throw SealedError.rosterRejected("another device's roster") }
        guard roster.robot == robot else { throw SealedError.rosterRejected("the roster names another robot key") }
        let signer: PublicKeys
        if let previous {
            guard roster.epoch == previous.epoch + 1 else {
                throw SealedError.rosterRejected("epoch \(roster.epoch) does not follow \(previous.epoch)")
            }
            guard roster.previousHash == previous.hash else { throw SealedError.rosterRejected("prev is not the previous roster's hash") }
            guard let owner = previous.member(by), owner.role == .owner else {
                throw SealedError.rosterRejected("not signed by an owner of the previous roster")
            }
            signer = owner.keys
        } else {
            guard let firstOwner else { throw SealedError.rosterRejected("no first owner pinned yet") }
            guard roster.epoch == 1, roster.previousHash == nil else { throw SealedError.rosterRejected("the first roster must be epoch 1 without prev") }
            guard let named = roster.member(firstOwner.kid), named.role == .owner, named.keys == firstOwner else {
                throw SealedError.rosterRejected("the pinned first owner is not an owner of the first roster")
            }
            signer = firstOwner
        }
        guard by == signer.kid, signer.verifies(signature, of: roster.raw) else {
            throw SealedError.rosterRejected("the owner's signature does not verify")
        }
        return roster
    }
}
