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
            let until = item["until"]?.stringValue.flatMap(ISO8601.date).map { Int64($0.timeIntervalSince1970 * 1000) }
            return PendingSealedMember(keys: keys, tokenID: tokenID, label: item["label"]?.stringValue ?? "", access: access,
                                       control: item["control"]?.boolValue ?? false, until: until)
        }
    }

    /// An owner's app signs the next roster — the current one's members (or, for the first, this
    /// app alone as owner) with `adding` and without `removing` — and hands it to the robot
    /// (`POST …/sealed/rosters`). The robot verifies it and stores the new epoch; every member then
    /// fetches its package. Returns the roster's epoch.
    @discardableResult
    public func signNextRoster(adding: [RosterMember] = [], removing kids: Set<String> = [],
                               lockScreen: LockScreenPolicy = .status) async throws -> Int {
        guard let state = seal, let robot = state.robot else {
            throw RelayClientError.invalidResponse("the robot's key is not known yet: verify it, or fetch the current epoch")
        }
        let current = state.current?.roster
        let me = RosterMember(keys: state.household.identity.publicKeys, role: .owner, control: true, until: nil, label: "")
        var members = (current?.members ?? [me]).filter { !kids.contains($0.kid) }
        for member in adding where !members.contains(where: { $0.kid == member.kid }) { members.append(member) }
        let roster = try Roster.make(deviceID: configuration.deviceID, epoch: (current?.epoch ?? 0) + 1, previousHash: current?.hash,
                                     made: Int64(Date().timeIntervalSince1970 * 1000), robot: robot, members: members,
                                     lockScreen: current?.lockScreen ?? lockScreen)
        let signed = try roster.signed(by: state.household.identity)
        seal?.proposed = (roster.epoch, .now)
        do {
            _ = try await deviceCall("POST", .sealed, ["rosters"], body: .object(signed.json.mapValues(JSON.string)), expecting: 202)
        } catch {
            seal?.proposed = nil
            throw error
        }
        return roster.epoch
    }

    /// Owners: signs the next roster without the members who have gone — those the relay lists
    /// as `departed` (removed, left, revoked, past their `until`) and the guests whose `until` has
    /// passed on this app's clock. Returns the new epoch; nil when nobody is to go, or when this
    /// app is not an owner in the current roster. The relay's word can only take members out.
    @discardableResult
    public func signOutDepartedMembers() async throws -> Int? {
        guard let state = seal, let roster = state.current?.roster, state.isOwner else { return nil }
        let me = state.household.identity.publicKeys.kid
        var departed = Set<String>()
        if case .array(let kids)? = try await deviceCall("GET", .sealed, ["members"])["departed"] {
            departed = Set(kids.compactMap(\.stringValue))
        }
        let now = Int64(Date().timeIntervalSince1970 * 1000)
        let leaving = Set(roster.members.filter { departed.contains($0.kid) || ($0.until ?? .max) <= now }.map(\.kid))
            .subtracting([me])
        // Checked after the await, right before signing (which marks its roster at once): a roster
        // this app signed is on its way (the robot stores it within moments; after 30 s it is
        // taken as refused), and the next epoch's watch signs out whoever is still to go.
        if let proposed = seal?.proposed, proposed.epoch > seal?.current?.number ?? 0,
           ContinuousClock.now - proposed.at < .seconds(30) { return nil }
        guard !leaving.isEmpty, seal?.current?.number == roster.epoch else { return nil }
        return try await signNextRoster(removing: leaving)
    }

    /// An owner's app keeps the roster to the household by itself (docs/protocol.md "Sealed
    /// devices (v1.5)"): it signs out who has gone now, and again when the next guest's `until`
    /// passes. Run on each connect and each new epoch; a 409 (another owner was first) is fine.
    func watchDepartures() {
        guard let state = seal, let roster = state.current?.roster, state.isOwner else { return }
        seal?.departureWatch?.cancel()
        let now = Int64(Date().timeIntervalSince1970 * 1000)
        let nextEnd = roster.members.compactMap(\.until).filter { $0 > now }.min()
        seal?.departureWatch = Task { [weak self] in
            _ = try? await self?.signOutDepartedMembers()
            guard let nextEnd else { return }
            do { try await Task.sleep(for: .milliseconds(nextEnd - now + 500)) } catch { return }
            _ = try? await self?.signOutDepartedMembers()
        }
    }
}
