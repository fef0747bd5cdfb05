import Foundation
import WimzProtocol
import WimzSealed

/// A member an owner's app can sign into the next roster: its keys (handed over with
/// ``RelayClient/joinSealedHousehold()``) and its token's place in the household.
public struct PendingSealedMember: Sendable, Equatable {
    public var keys: PublicKeys
    public var tokenID: Int64
    public var label: String
    public var access: Access
    public var control: Bool
    /// The member's end, ms since 1970 (a guest's `until`).
    public var until: Int64?

    /// Its roster entry.
    public var rosterMember: RosterMember {
        RosterMember(keys: keys, role: RosterMember.Role(rawValue: access.rawValue) ?? .guest, control: control, until: until, label: label)
    }
}

extension RelayClient {
    /// Members whose keys are not in the current roster yet (`GET …/sealed/members`), each
    /// with its `kid` checked against its keys.
    public func pendingSealedMembers() async throws -> [PendingSealedMember] {
        let answer = try await deviceCall("GET", .sealed, ["members"])
        guard case .array(let items)? = answer["members"] else { throw RelayClientError.invalidResponse("members: no list") }
        return try items.map { item in
            guard let sign = item["sign"]?.stringValue.flatMap(Base64URL.decode), let hpke = item["hpke"]?.stringValue.flatMap(Base64URL.decode),
                  let keys = try? PublicKeys(sign: sign, hpke: hpke), keys.kid == item["kid"]?.stringValue,
                  let tokenID = item["token_id"]?.int64Value, let access = item["access"]?.stringValue.flatMap(Access.init(rawValue:))
            else { throw RelayClientError.invalidResponse("members: \(item.text.prefix(200))") }
            return PendingSealedMember(keys: keys, tokenID: tokenID, label: item["label"]?.stringValue ?? "", access: access,
                                       control: item["control"]?.boolValue ?? false, until: Self.milliseconds(item["until"]))
        }
    }

    /// An owner's app signs the next roster — the current one's members (or, for the first, this
    /// app alone as owner) with `adding`, without `removing`, and with the entries of `updating`
    /// in place of those with the same `kid` — and hands it to the robot
    /// (`POST …/sealed/rosters`). The robot verifies it and stores the new epoch; every member then
    /// fetches its package. Returns the roster's epoch.
    @discardableResult
    public func signNextRoster(adding: [RosterMember] = [], removing kids: Set<String> = [], updating: [RosterMember] = [],
                               lockScreen: LockScreenPolicy = .status) async throws -> Int {
        guard let state = seal, let robot = state.robot else {
            throw RelayClientError.invalidResponse("the robot's key is not known yet: verify it, or fetch the current epoch")
        }
        let current = state.current?.roster
        let me = RosterMember(keys: state.household.identity.publicKeys, role: .owner, control: true, until: nil, label: "")
        var members = (current?.members ?? [me]).filter { !kids.contains($0.kid) }.map { member in
            updating.first { $0.kid == member.kid } ?? member
        }
        for member in adding where !members.contains(where: { $0.kid == member.kid }) { members.append(member) }
        let roster = try Roster.make(deviceID: configuration.deviceID, epoch: (current?.epoch ?? 0) + 1, previousHash: current?.hash,
                                     made: Int64(Date().timeIntervalSince1970 * 1000), robot: robot, members: members,
                                     lockScreen: current?.lockScreen ?? lockScreen)
        let signed = try roster.signed(by: state.household.identity)
        seal?.proposed = (roster.epoch, .now)
        do {
            _ = try await deviceCall("POST", .sealed, ["rosters"], body: try Self.proposal(signed, departures: roster.departures(
                signedBy: state.household.identity, after: roster.made)), expecting: 202)
        } catch {
            seal?.proposed = nil
            throw error
        }
        return roster.epoch
    }

    /// The largest body a proposal takes: the relay's 64 KiB, less room for the envelope.
    static let proposalLimit = 60 * 1024

    /// `{"roster","by","sig"}` with the rosters that follow it at its guests' ends, signed ahead
    /// (`"departures"`): the robot keeps them and takes each guest out on its own clock, so a
    /// guest's end needs no owner's app after the one that signed the guest in. As many as fit
    /// (a prefix of the chain is a chain); the rest follow in a `roster_schedule` when an owner's
    /// app next connects.
    static func proposal(_ signed: SignedRoster, departures: [SignedRoster]) -> JSON {
        var chain = departures
        while true {
            var body = signed.json.mapValues(JSON.string)
            if !chain.isEmpty { body["departures"] = .array(chain.map { .object($0.json.mapValues(JSON.string)) }) }
            let proposal = JSON.object(body)
            if chain.isEmpty || proposal.text.utf8.count <= proposalLimit { return proposal }
            chain.removeLast()
        }
    }
}
