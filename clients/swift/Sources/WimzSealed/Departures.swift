import Foundation
import WimzProtocol

extension Roster {
    /// The departures an owner signs ahead (docs/protocol.md "Sealed devices (v1.5)"): one next
    /// roster per member's end after `now` (ms since 1970), each without the members whose end has
    /// come and made at that end, chained to this roster. The robot keeps the chain and accepts
    /// each roster when its own clock reaches it: a robot signs no roster, so this is how a
    /// guest's end becomes a new epoch while no owner's app runs. Empty when no end is ahead.
    public func departures(signedBy owner: SealedIdentity, after now: Int64) throws -> [SignedRoster] {
        let ends = Set(members.compactMap(\.until).filter { $0 > now }).sorted().prefix(WimzProtocol.maxScheduledDepartures)
        var previous = self
        return try ends.map { end in
            let next = try Roster.make(deviceID: deviceID, epoch: previous.epoch + 1, previousHash: previous.hash, made: end,
                                       robot: robot, members: previous.members.filter { ($0.until ?? .max) > end }, lockScreen: lockScreen)
            previous = next
            return try next.signed(by: owner)
        }
    }
}
