import Foundation
import Testing
@testable import WimzSealed

/// The departures an owner's app signs ahead: one roster per guest's end, each following the one
/// before as the robot checks it, made at that end, without exactly the members whose end has come.
@Suite struct DeparturesTests {
    @Test func eachEndAheadIsOneRosterChainedToTheLast() throws {
        let robot = SealedIdentity(), owner = SealedIdentity(), family = SealedIdentity()
        let sitter = SealedIdentity(), walker = SealedIdentity(), gone = SealedIdentity()
        let now: Int64 = 1_795_000_000_000
        func guest(_ person: SealedIdentity, _ until: Int64) -> RosterMember {
            RosterMember(keys: person.publicKeys, role: .guest, control: false, until: until, label: "")
        }
        let current = try Roster.make(deviceID: "dev1", epoch: 4, previousHash: String(repeating: "a", count: 64), made: now - 10,
                                      robot: robot.publicKeys, members: [
                                          RosterMember(keys: owner.publicKeys, role: .owner, control: true, until: nil, label: ""),
                                          RosterMember(keys: family.publicKeys, role: .family, control: true, until: nil, label: ""),
                                          guest(sitter, now + 7_000), guest(walker, now + 3_000), guest(gone, now - 1),
                                      ], lockScreen: .full)
        let chain = try current.departures(signedBy: owner, after: now)
        var previous = current
        for signed in chain {
            previous = try signed.verifiedAsNext(after: previous, deviceID: "dev1", robot: robot.publicKeys)
            #expect(signed.by == owner.kid && previous.lockScreen == .full)
        }
        #expect(chain.map(\.roster.epoch) == [5, 6] && chain.map(\.roster.made) == [now + 3_000, now + 7_000])
        // The first also takes out the guest whose end had passed already.
        #expect(chain[0].roster.members.map(\.kid) == [owner.kid, family.kid, sitter.kid])
        #expect(chain[1].roster.members.map(\.kid) == [owner.kid, family.kid])
        #expect(try current.departures(signedBy: owner, after: now + 7_000).isEmpty)
    }
}
