import Foundation
import WimzProtocol
import WimzSealed

/// A sealed household's past (docs/protocol.md v1.6): earlier epochs fetched back to the horizon
/// for entries of the timeline, an owner's history shared with a family member, and that share
/// accepted by the member's app only under the signature of an owner of a roster it holds.
extension SealState {
    /// An earlier epoch's answer (`GET …/sealed/epochs/E`): this device's, the robot key held,
    /// accepted by the robot, this app's package opened. It never becomes the epoch sealed with.
    mutating func adoptEarlier(_ object: [String: Any], number: Int) throws -> Epoch {
        let roster = try Self.signedRoster(object).roster
        guard roster.epoch == number, number < current?.number ?? 0 else { throw SealedError.rosterRejected("not epoch \(number)") }
        try check(roster)
        let epoch = try opened(roster, object)
        opener.hold(epoch)
        return epoch
    }

    /// The epochs of the answer's `"history"` (an owner's grant to this member) not held yet,
    /// held once the grant verifies; none when there is no grant.
    mutating func granted(_ object: [String: Any]) throws -> [Epoch] {
        guard let grant = try HistoryGrant(json: object["history"] as? [String: Any]), let current else { return [] }
        let held = Set(opener.heldEpochs)
        let fresh = try grant.open(deviceID: deviceID, identity: household.identity, rosters: opener.heldRosters, current: current.roster)
            .filter { !held.contains($0.number) }
        for epoch in fresh { opener.hold(epoch) }
        return fresh
    }
}

extension RelayClient {
    /// An owner shares the household's earlier history with family member `kid` of the current
    /// roster: every epoch secret this app holds, sealed to the member's key, signed, and handed
    /// to the relay (`PUT …/sealed/history/{kid}`), which gives it to that member alone. A new
    /// share replaces the last; a member made guest or removed loses it. Returns the epochs shared.
    /// - Throws: ``RelayClientError`` when the member is not family of the current roster, this
    ///   app is not its owner, or the relay refuses (`invalid_grant`; `forbidden` for a guest).
    @discardableResult
    public func shareHistory(with kid: String) async throws -> [Int] {
        guard let state = seal, let current = state.current, state.isOwner else {
            throw RelayClientError.invalidResponse("only an owner of the current roster shares history")
        }
        guard let member = current.roster.member(kid), member.role == .family else {
            throw RelayClientError.invalidResponse("\(kid) is not a family member of the current roster")
        }
        let epochs = state.opener.held
        let grant = try HistoryGrant.make(deviceID: configuration.deviceID, for: member, epochs: epochs, by: state.household.identity)
        _ = try await deviceCall("PUT", .sealed, ["history", kid], body: .object(grant.json.mapValues(JSON.string)))
        return epochs.map(\.number).sorted()
    }

    /// Holds the epochs of an epoch answer's history grant and keeps them; one that does not
    /// verify is reported as ``RelayEvent/sealedHistoryRejected(_:)``.
    func acceptHistory(_ answer: [String: Any]) {
        do {
            try keep(try seal!.granted(answer))
        } catch let error as SealedError {
            eventSink.yield(.sealedHistoryRejected(error))
        } catch {
            eventSink.yield(.sealedHistoryRejected(.malformed("\(error)")))
        }
    }

    /// Keeps `epochs` in the household's store, when it has one.
    func keep(_ epochs: [Epoch]) throws {
        guard let store = seal?.household.store else { return }
        for epoch in epochs { try store.keep(epoch, of: configuration.deviceID) }
    }

    /// Fetches the epochs in `numbers` this app does not hold yet: an earlier one of its own from
    /// the relay (`GET …/sealed/epochs/E`, answered back to the horizon), a later one by
    /// refreshing the current epoch, and once an earlier one is refused (it was not a member
    /// then) the current answer again, for an owner's history grant that may cover it.
    func fetchEpochs(_ numbers: Set<Int>) async {
        guard let state = seal, let current = state.current?.number else { return }
        let wanted = numbers.subtracting(state.opener.heldEpochs).subtracting(state.unavailableEpochs)
        var refresh = wanted.contains { $0 > current }
        for number in wanted.filter({ $0 < current }).sorted() {
            do {
                let answer = try SealState.epochAnswer(try await deviceCall("GET", .sealed, ["epochs", String(number)]))
                guard var state = seal else { return }
                let epoch = try state.adoptEarlier(answer, number: number)
                seal = state
                try keep([epoch])
            } catch let error as RelayClientError where ![ErrorCode.notInRoster, .notFound].contains(error.errorCode) {
                return  // not an answer (the network, the relay's front): asked again with the next page
            } catch {
                // Refused (not_in_roster, past the horizon) or not verifying: a grant may cover it.
                seal?.unavailableEpochs.insert(number)
                refresh = true
            }
        }
        if refresh { _ = try? await refreshSealedEpoch() }
    }
}
