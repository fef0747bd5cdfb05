import WimzProtocol

/// The sealed household's request bodies, read strictly (docs/protocol.md "The sealed household
/// (v1.5)"). The relay checks what it can without a secret: shapes, sizes, that a `kid` is its
/// keys', and that an uploaded roster is this device's, of this epoch, with one package per
/// member. Signatures are the ends' business: they verify everything the relay hands them. Pure,
/// beside the household's rules (`HouseholdRules`); the one digest it needs is handed in.
public enum SealedRules {
    /// An app's public keys for one device (B64 text, checked by the caller: 32 bytes each, `kid` theirs).
    public struct MemberKey: Sendable, Equatable {
        public var appTokenID: Int64
        public var kid: String
        public var sign: String
        public var hpke: String

        public init(appTokenID: Int64, kid: String, sign: String, hpke: String) {
            (self.appTokenID, self.kid, self.sign, self.hpke) = (appTokenID, kid, sign, hpke)
        }
    }

    /// A member's epoch secret, sealed to its key: `kid` and B64 of the encapsulated key and ciphertext.
    public struct Package: Sendable, Equatable {
        public var kid: String
        public var sealed: String

        public init(kid: String, sealed: String) { (self.kid, self.sealed) = (kid, sealed) }
    }

    /// An epoch as the robot uploads it (checked by the caller against the path and the roster).
    public struct EpochUpload: Sendable, Equatable {
        public var epoch: Int
        /// B64 of the roster's exact bytes, the owner's `kid`, the owner's signature.
        public var roster: String
        public var signedBy: String
        public var signature: String
        public var robotSignature: String
        /// One package per member of the roster.
        public var packages: [Package]

        public init(epoch: Int, roster: String, signedBy: String, signature: String, robotSignature: String, packages: [Package]) {
            (self.epoch, self.roster, self.signedBy, self.signature) = (epoch, roster, signedBy, signature)
            (self.robotSignature, self.packages) = (robotSignature, packages)
        }
    }

    /// `{"sign":B64,"hpke":B64}`, 32 bytes each: the app's keys and their `kid` (`sha256`: the
    /// relay's SHA-256, RelayCrypto's).
    public static func memberKey(_ body: [UInt8], appTokenID: Int64, sha256: ([UInt8]) -> [UInt8]) throws(RelayError) -> MemberKey {
        let usage = #"send {"sign":B64,"hpke":B64}: both raw 32-byte public keys, base64url without padding"#
        guard let json = try? JSONReader.parse(body), case .object = json,
              let sign = json.member("sign")?.stringValue, let signKey = Base64.decodeURLSafe(sign), signKey.count == 32,
              let hpke = json.member("hpke")?.stringValue, let hpkeKey = Base64.decodeURLSafe(hpke), hpkeKey.count == 32
        else { throw RelayError(.badRequest, usage) }
        return .init(appTokenID: appTokenID, kid: kid(sign: signKey, hpke: hpkeKey, sha256: sha256), sign: sign, hpke: hpke)
    }

    /// The lower-case hex of the first 16 bytes of SHA-256(Ed25519 public ‖ X25519 public).
    public static func kid(sign: [UInt8], hpke: [UInt8], sha256: ([UInt8]) -> [UInt8]) -> String {
        Hex.encode(Array(sha256(sign + hpke).prefix(16)))
    }

    /// An owner's signed roster as the relay reads it: the envelope's fields, and the epoch and
    /// members' `kid`s of the roster inside (which names this device).
    public struct SignedRoster: Sendable, Equatable {
        public var roster: String, by: String, signature: String
        public var epoch: Int
        public var members: Set<String>

        /// The envelope as stored and handed to the robot (every value base64url or hex: nothing to escape).
        public var json: String { #"{"roster":"\#(roster)","by":"\#(by)","sig":"\#(signature)"}"# }
    }

    /// `{"roster":B64,"by":KID,"sig":B64}` of `device`.
    public static func signedRoster(_ json: JSONValue?, device: DeviceID) throws(RelayError) -> SignedRoster {
        guard let json, case .object = json, let roster = json.member("roster")?.stringValue, let bytes = Base64.decodeURLSafe(roster),
              let by = json.member("by")?.stringValue, isKid(by),
              let signature = json.member("sig")?.stringValue, Base64.decodeURLSafe(signature)?.count == 64
        else { throw RelayError(.badRequest, #"a signed roster is {"roster":B64,"by":KID,"sig":B64}"#) }
        let (epoch, members) = try rosterContents(bytes, device: device)
        return SignedRoster(roster: roster, by: by, signature: signature, epoch: epoch, members: members)
    }

    /// An owner's proposal, `POST …/sealed/rosters`: a signed roster of `device` and, optionally,
    /// `"departures"`, the rosters that follow it at its guests' ends, signed ahead (epochs E + 1,
    /// E + 2, …, at most 32). Returned as stored and handed to the robot: the envelope, with the
    /// departures when there are any. The robot verifies the chain; the relay checks its shape.
    public static func proposal(_ body: [UInt8], device: DeviceID) throws(RelayError) -> (epoch: Int, json: String) {
        guard let json = try? JSONReader.parse(body), case .object = json else { throw RelayError(.badRequest, "the body is not JSON") }
        let signed = try signedRoster(json, device: device)
        let most = WimzProtocol.maxScheduledDepartures
        let usage = "departures is a list of 1 to \(most) signed rosters, epochs \(signed.epoch + 1), \(signed.epoch + 2), …"
        let items: [JSONValue]
        switch json.member("departures") {
        case nil, .null?: return (signed.epoch, signed.json)
        case .array(let list)? where (1...most).contains(list.count): items = list
        default: throw RelayError(.badRequest, usage)
        }
        var departures: [String] = []
        for (offset, item) in items.enumerated() {
            let departure = try signedRoster(item, device: device)
            guard departure.epoch == signed.epoch + offset + 1 else { throw RelayError(.badRequest, usage) }
            departures.append(departure.json)
        }
        return (signed.epoch, "\(signed.json.dropLast()),\"departures\":[\(departures.joined(separator: ","))]}")
    }

    /// `{"roster":{"roster":B64,"by":KID,"sig":B64},"robot_sig":B64,"packages":[{"kid","sealed"}…]}`
    /// for epoch `epoch` of `device`.
    public static func epochUpload(_ body: [UInt8], device: DeviceID, epoch: Int) throws(RelayError) -> EpochUpload {
        let usage = #"send {"roster":{"roster":B64,"by":KID,"sig":B64},"robot_sig":B64,"packages":[{"kid":KID,"sealed":B64},…]}"#
        guard let json = try? JSONReader.parse(body), case .object = json,
              let robotSignature = json.member("robot_sig")?.stringValue, Base64.decodeURLSafe(robotSignature)?.count == 64,
              let items = json.member("packages")?.arrayValue
        else { throw RelayError(.badRequest, usage) }
        let signed = try signedRoster(json.member("roster"), device: device)
        guard signed.epoch == epoch else { throw RelayError(.badRequest, "the roster is of epoch \(signed.epoch), not \(epoch)") }
        var packages: [Package] = []
        for item in items {
            // The encapsulated key (32 bytes), then the secret (32) and its tag (16).
            guard let kid = item.member("kid")?.stringValue, isKid(kid), let sealed = item.member("sealed")?.stringValue,
                  Base64.decodeURLSafe(sealed)?.count == 80
            else { throw RelayError(.badRequest, "each package is {\"kid\":KID,\"sealed\":B64} of 80 bytes") }
            packages.append(.init(kid: kid, sealed: sealed))
        }
        guard Set(packages.map(\.kid)) == signed.members, packages.count == signed.members.count else {
            throw RelayError(.badRequest, "one package for each member of the roster, and none for anyone else")
        }
        return .init(epoch: epoch, roster: signed.roster, signedBy: signed.by, signature: signed.signature,
                     robotSignature: robotSignature, packages: packages)
    }

    /// A member of a roster as the relay reads it: its role and its signing key (B64).
    public struct RosterMember: Sendable, Equatable {
        public var role: String
        public var sign: String
    }

    /// The members of a stored roster (B64 of its exact bytes), by `kid`; nil when it can't be read.
    public static func rosterMembers(_ roster: String) -> [String: RosterMember]? {
        guard let bytes = Base64.decodeURLSafe(roster), let json = try? JSONReader.parse(bytes),
              let items = json.member("members")?.arrayValue else { return nil }
        var members: [String: RosterMember] = [:]
        for item in items {
            guard let kid = item.member("kid")?.stringValue, let role = item.member("role")?.stringValue,
                  let sign = item.member("sign")?.stringValue else { return nil }
            members[kid] = RosterMember(role: role, sign: sign)
        }
        return members
    }

    /// An owner's grant of earlier history to a family member (v1.6), as sent:
    /// `{"grant":B64,"by":KID,"sig":B64}`, the grant's exact bytes the JSON
    /// `{"device_id","kid","epochs":[{"epoch":E,"sealed":B64}…]}` of this device and of `kid`.
    public struct HistoryGrant: Sendable, Equatable {
        public var signed: SignedGrant
        /// The grant's exact bytes (what the signature signs).
        public var bytes: [UInt8]
        public var epochs: [Int]
    }

    /// A grant as stored and handed to its member: `{"grant":B64,"by":KID,"sig":B64}`.
    public struct SignedGrant: Sendable, Equatable {
        public var grant: String, by: String, signature: String

        public init(grant: String, by: String, signature: String) { (self.grant, self.by, self.signature) = (grant, by, signature) }

        public var json: JSONValue { .object([("grant", .string(grant)), ("by", .string(by)), ("sig", .string(signature))]) }
    }

    public static func historyGrant(_ body: [UInt8], device: DeviceID, kid: String) throws(RelayError) -> HistoryGrant {
        let usage = #"send {"grant":B64,"by":KID,"sig":B64}, the grant {"device_id","kid","epochs":[{"epoch":E,"sealed":B64},…]}"#
        guard isKid(kid) else { throw RelayError(.invalidGrant, "the path's kid is not a member key's id") }
        guard let json = try? JSONReader.parse(body), case .object = json, let grant = json.member("grant")?.stringValue,
              let bytes = Base64.decodeURLSafe(grant), let by = json.member("by")?.stringValue, isKid(by),
              let signature = json.member("sig")?.stringValue, Base64.decodeURLSafe(signature)?.count == 64,
              let inner = try? JSONReader.parse(bytes), case .object = inner, let items = inner.member("epochs")?.arrayValue
        else { throw RelayError(.invalidGrant, usage) }
        guard inner.member("device_id")?.stringValue == device.rawValue, inner.member("kid")?.stringValue == kid else {
            throw RelayError(.invalidGrant, "the grant names another device or member")
        }
        var epochs: [Int] = []
        for item in items {
            guard let epoch = item.member("epoch")?.intValue, (1...Int64(Int32.max)).contains(epoch),
                  let sealed = item.member("sealed")?.stringValue, Base64.decodeURLSafe(sealed)?.count == 80
            else { throw RelayError(.invalidGrant, "each epoch is {\"epoch\":E,\"sealed\":B64} of 80 bytes") }
            epochs.append(Int(epoch))
        }
        guard !epochs.isEmpty, Set(epochs).count == epochs.count else { throw RelayError(.invalidGrant, "one package per epoch, at least one") }
        return HistoryGrant(signed: SignedGrant(grant: grant, by: by, signature: signature), bytes: bytes, epochs: epochs)
    }

    /// The epoch and members' `kid`s of a roster that names this device.
    private static func rosterContents(_ bytes: [UInt8], device: DeviceID) throws(RelayError) -> (Int, Set<String>) {
        guard let roster = try? JSONReader.parse(bytes), case .object = roster, let items = roster.member("members")?.arrayValue,
              let epoch = roster.member("epoch")?.intValue, (1...Int64(Int32.max)).contains(epoch)
        else { throw RelayError(.badRequest, "the roster is not the contract's JSON") }
        guard roster.member("device_id")?.stringValue == device.rawValue else {
            throw RelayError(.badRequest, "the roster is not of this device")
        }
        let kids = items.compactMap { $0.member("kid")?.stringValue }.filter(isKid)
        guard kids.count == items.count, Set(kids).count == kids.count, !kids.isEmpty else {
            throw RelayError(.badRequest, "the roster's members need distinct kids")
        }
        return (Int(epoch), Set(kids))
    }

    private static func isKid(_ text: String) -> Bool {
        text.utf8.count == 32 && text.utf8.allSatisfy { (48...57).contains($0) || (97...102).contains($0) }
    }
}
