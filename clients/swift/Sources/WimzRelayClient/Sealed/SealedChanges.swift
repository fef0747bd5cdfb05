import Foundation
import WimzProtocol
import WimzSealed

/// A change this app's own user made to a member (``RelayClient/updateMember(_:access:control:until:)``):
/// what an owner's app may sign into the next roster even when it grants rights.
struct MemberChange: Sendable {
    var tokenID: Int64
    var access: Access?
    var control: Bool?
    var until: UntilChange
}

/// A grant the relay holds that a member's roster entry lacks (``RelayClient/pendingSealedGrants()``):
/// the entry as signed, and as it would be signed with the grant.
public struct SealedGrant: Sendable, Equatable {
    public var tokenID: Int64
    /// The member's entry in the current roster.
    public var member: RosterMember
    /// The entry with the relay's role, `control` and end.
    public var granted: RosterMember
}

/// A signed-in member's token as the relay holds it now (`GET …/sealed/members`, `signed_in`).
private struct RelayMember {
    var tokenID: Int64
    var role: RosterMember.Role
    var control: Bool
    var until: Int64?
}

extension RosterMember.Role {
    fileprivate var rank: Int { switch self { case .guest: 0; case .family: 1; case .owner: 2 } }
}

extension RosterMember {
    /// This member with the relay's change where it takes rights away (a lower role, control
    /// withdrawn, an earlier end), and nothing the relay would grant.
    fileprivate func narrowed(to relay: RelayMember) -> RosterMember {
        let role = relay.role.rank < self.role.rank ? relay.role : self.role
        let until = [self.until, relay.until].compactMap { $0 }.min()
        return RosterMember(keys: keys, role: role, control: control && relay.control, until: until, label: label)
    }

    /// This member as this app's user changed it; what the change leaves alone, narrowed as the
    /// relay says (a guest made family or owner loses its end, as the relay's rule is).
    fileprivate func changed(by change: MemberChange, relay: RelayMember) -> RosterMember {
        let narrowed = narrowed(to: relay)
        let role = change.access.flatMap { RosterMember.Role(rawValue: $0.rawValue) } ?? narrowed.role
        let until: Int64? = switch change.until {
        case .unchanged: role == .guest ? narrowed.until : nil
        case .removed: nil
        case .at(let date): Int64(date.timeIntervalSince1970.rounded(.down)) * 1000  // the relay keeps whole seconds
        }
        return RosterMember(keys: keys, role: role, control: change.control ?? narrowed.control, until: until, label: label)
    }
}

extension RelayClient {
    /// Owners: signs the next roster when the household at the relay has changed since the current
    /// one — without the members who have gone (`departed` at the relay: removed, left, revoked,
    /// past their `until`; and guests whose `until` has passed on this app's clock), and with the
    /// v1.3 changes (`PATCH`) that take rights away. A change that grants rights goes in only when
    /// this app's user made it (``updateMember(_:access:control:until:)``): the relay's word alone
    /// never raises anyone, nor changes this app's own entry. Returns the new epoch; nil when
    /// nothing changed, or when this app is not an owner in the current roster.
    @discardableResult
    public func signHouseholdChanges() async throws -> Int? {
        try await signHouseholdChanges(asked: nil)
    }

    func signHouseholdChanges(asked: MemberChange?) async throws -> Int? {
        guard let state = seal, let roster = state.current?.roster, state.isOwner else { return nil }
        let me = state.household.identity.publicKeys.kid
        let (departed, relay) = try await householdAtRelay()
        let now = Int64(Date().timeIntervalSince1970 * 1000)
        let leaving = Set(roster.members.filter { departed.contains($0.kid) || ($0.until ?? .max) <= now }.map(\.kid))
            .subtracting([me])
        let updated = roster.members.compactMap { member -> RosterMember? in
            guard member.kid != me, !leaving.contains(member.kid), let atRelay = relay[member.kid] else { return nil }
            let next = if let asked, asked.tokenID == atRelay.tokenID { member.changed(by: asked, relay: atRelay) } else { member.narrowed(to: atRelay) }
            return next == member ? nil : next
        }
        // Checked after the await, right before signing (which marks its roster at once): a roster
        // this app signed is on its way (the robot stores it within moments; after 30 s it is
        // taken as refused), and the next epoch's watch signs whatever is still to change.
        if let proposed = seal?.proposed, proposed.epoch > seal?.current?.number ?? 0,
           ContinuousClock.now - proposed.at < .seconds(30) { return nil }
        guard !leaving.isEmpty || !updated.isEmpty, seal?.current?.number == roster.epoch else { return nil }
        return try await signNextRoster(removing: leaving, updating: updated)
    }

    /// Owners: the grants the relay holds for signed-in members that their roster entries lack
    /// (a higher role, `control` given, a later or no end), made outside this app: the CLI, an
    /// owner's app without the seal. Never signed on the relay's word alone; a UI shows them to
    /// its owner, who confirms with ``confirmGrants(_:)``. Empty when this app is not an owner.
    public func pendingSealedGrants() async throws -> [SealedGrant] {
        guard let state = seal, let roster = state.current?.roster, state.isOwner else { return [] }
        let me = state.household.identity.publicKeys.kid
        let relay = try await householdAtRelay().signedIn
        return roster.members.compactMap { member in
            guard member.kid != me, let atRelay = relay[member.kid] else { return nil }
            let asListed = RosterMember(keys: member.keys, role: atRelay.role, control: atRelay.control, until: atRelay.until, label: member.label)
            let later = member.until.map { end in asListed.until.map { $0 > end } ?? true } ?? false
            guard asListed.role.rank > member.role.rank || (asListed.control && !member.control) || later else { return nil }
            return SealedGrant(tokenID: atRelay.tokenID, member: member, granted: asListed)
        }
    }

    /// Owners: signs the next roster with `grants` (from ``pendingSealedGrants()``) exactly as
    /// they were shown, for members whose entries have not changed since. Returns the new epoch;
    /// nil when none still applies or this app is not an owner.
    @discardableResult
    public func confirmGrants(_ grants: [SealedGrant]) async throws -> Int? {
        guard let state = seal, let roster = state.current?.roster, state.isOwner else { return nil }
        let updating = grants.filter { roster.members.contains($0.member) }.map(\.granted)
        guard !updating.isEmpty else { return nil }
        return try await signNextRoster(updating: updating)
    }

    /// The household as the relay has it now (`GET …/sealed/members`): who has gone (`departed`)
    /// and each signed-in member's token (`signed_in`), by `kid`.
    private func householdAtRelay() async throws -> (departed: Set<String>, signedIn: [String: RelayMember]) {
        let answer = try await deviceCall("GET", .sealed, ["members"])
        var departed = Set<String>(), relay: [String: RelayMember] = [:]
        if case .array(let kids)? = answer["departed"] { departed = Set(kids.compactMap(\.stringValue)) }
        guard case .array(let signedIn)? = answer["signed_in"] ?? .array([]) else { throw RelayClientError.invalidResponse("signed_in: no list") }
        for item in signedIn {
            guard let kid = item["kid"]?.stringValue, let tokenID = item["token_id"]?.int64Value,
                  let role = item["access"]?.stringValue.flatMap(RosterMember.Role.init(rawValue:)), let control = item["control"]?.boolValue
            else { throw RelayClientError.invalidResponse("signed_in: \(item.text.prefix(200))") }
            relay[kid] = RelayMember(tokenID: tokenID, role: role, control: control, until: Self.milliseconds(item["until"]))
        }
        return (departed, relay)
    }

    /// Owners: hands the robot the current roster's departures, signed ahead
    /// (``Roster/departures(signedBy:after:)``) and sealed as `{"type":"roster_schedule","rosters":[…]}`,
    /// so that each guest's end is a new epoch whether or not an owner's app runs then. Returns
    /// how many rosters went (0: no end ahead, or this app is not an owner).
    @discardableResult
    public func scheduleDepartures() async throws -> Int {
        guard let state = seal, let roster = state.current?.roster, state.isOwner else { return 0 }
        let chain = try roster.departures(signedBy: state.household.identity, after: Int64(Date().timeIntervalSince1970 * 1000))
        guard !chain.isEmpty else { return 0 }
        let schedule = JSON.object(["type": .string("roster_schedule"), "rosters": .array(chain.map { .object($0.json.mapValues(JSON.string)) })])
        try await send(text: schedule.text)
        return chain.count
    }

    /// An owner's app keeps the roster to the household by itself (docs/protocol.md "Sealed
    /// devices (v1.5)"): it signs the changes at the relay now, hands the robot the departures
    /// ahead, and when the next guest's `until` has passed (2 s later, so the robot's own scheduled
    /// roster goes first) signs out whoever is still in. Run on each connect and each new epoch; a
    /// 409 (another owner, or the robot's schedule, was first) is fine.
    func watchDepartures() {
        guard let state = seal, let roster = state.current?.roster, state.isOwner else { return }
        seal?.departureWatch?.cancel()
        let now = Int64(Date().timeIntervalSince1970 * 1000)
        let nextEnd = roster.members.compactMap(\.until).filter { $0 > now }.min()
        seal?.departureWatch = Task { [weak self] in
            let signed = try? await self?.signHouseholdChanges()
            guard signed == nil else { return }  // a new roster is on its way: its epoch watches again
            _ = try? await self?.scheduleDepartures()
            guard let nextEnd else { return }
            do { try await sleepOnDispatch(for: .milliseconds(nextEnd - now + 2000)) } catch { return }
            _ = try? await self?.signHouseholdChanges()
        }
    }

    /// A member's `until` as the relay sends it (ISO 8601, or null), in ms since 1970.
    static func milliseconds(_ until: JSON?) -> Int64? {
        until?.stringValue.flatMap(ISO8601.date).map { Int64($0.timeIntervalSince1970 * 1000) }
    }
}
