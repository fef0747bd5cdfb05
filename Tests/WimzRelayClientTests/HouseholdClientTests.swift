import Foundation
import Testing
import RelayTestSupport
@testable import WimzRelayClient

/// The household through the Swift client, against a real relay: an owner invites, a guest
/// joins with a code and is refused what the access table refuses, a change reaches its live
/// socket, removal stops its client.
@Suite struct HouseholdClientTests {
    private func relayURL(_ f: RelayFixture) -> URL { URL(string: "http://127.0.0.1:\(f.port)")! }

    /// Invites, redeems the code with ``RelayClient/pair(relay:code:label:session:)`` and starts a client on the new token.
    private func join(_ f: RelayFixture, owner: RelayClient, access: Access, label: String, until: Date? = nil) async throws
        -> (client: RelayClient, log: EventLog, paired: PairedDevice) {
        let invite = try await owner.invite(access: access, label: label, until: until)
        let paired = try await RelayClient.pair(relay: relayURL(f), code: try #require(invite.code), label: label)
        #expect(paired.access?.access == access && paired.access?.tokenID == paired.tokenID)
        let client = makeClient(f, token: paired.token)
        let log = EventLog(client)
        await client.start()
        _ = try await log.waitFor(isState(.connected))
        return (client, log, paired)
    }

    @Test func anOwnerInvitesAGuestWhoIsRefusedCommandsUntilGrantedControlAndRemovalStopsIt() async throws {
        let f = try await onThread { try RelayFixture() }
        let robot = try await onThread { try f.robot() }
        let owner = makeClient(f)
        let ownerLog = EventLog(owner)
        await owner.start()
        _ = try await ownerLog.waitFor(isOnline(true))
        let own = await owner.member
        #expect(own?.access == .owner && own?.control == true && own?.until == nil)

        let until = Date().addingTimeInterval(3600)
        let (guest, guestLog, paired) = try await join(f, owner: owner, access: .guest, label: "Sitter", until: until)
        // The greeting states the guest's own access.
        let (greeting, _) = try await guestLog.waitFor { if case .deviceStatus = $0 { true } else { false } }
        guard case .deviceStatus(let status) = greeting else { return }
        #expect(status.member?.tokenID == paired.tokenID && status.member?.access == .guest && status.member?.control == false)
        #expect(abs((status.member?.until ?? .distantPast).timeIntervalSince(until)) < 1)

        // A guest's command is refused by the relay and never reaches the robot.
        await #expect(throws: RelayClientError.forbidden(code: "forbidden", message: "a guest without control can't send commands")) {
            try await guest.send(command: "treat")
        }
        async let firstCommand = onThread { try answerNextCommand(robot) }
        _ = try await owner.send(command: "sit")
        #expect(try await firstCommand == "sit")  // the robot's first command is the owner's
        await #expect(throws: RelayClientError.self) { try await guest.members() }

        // Owner's view: the members and pending invites; a cancelled invite is gone.
        let members = try await owner.members()
        #expect(Set(members.map(\.access.tokenID)).contains(paired.tokenID))
        #expect(members.first { $0.access.tokenID == paired.tokenID }?.label == "Sitter")
        #expect(members.first { $0.access.tokenID == paired.tokenID }?.online == true)
        let pending = try await owner.invite(access: .family, label: "Grandma")
        #expect(try await owner.invites().map(\.id) == [pending.id])
        #expect(try await owner.invites().first?.code == nil)  // the code is shown once
        try await owner.cancelInvite(pending.id)
        #expect(try await owner.invites().isEmpty)

        // Control granted: the next command goes through on the same socket.
        let changed = try await owner.updateMember(paired.tokenID, control: true)
        #expect(changed.access.control && changed.access.access == .guest)
        async let answered = onThread { try answerNextCommand(robot) }
        #expect(try await guest.send(command: "treat").ok)
        _ = try await answered
        #expect(try await guest.refreshMember().control == true)

        // Removal: the guest's client stops for good.
        try await owner.removeMember(paired.tokenID)
        _ = try await guestLog.waitFor(timeout: 5) { if case .connection(.stopped(.revoked)) = $0 { true } else { false } }
        await owner.stop()
    }

    @Test func familyLeavesAndTheLastOwnerCannot() async throws {
        let f = try await onThread { try RelayFixture() }
        let owner = makeClient(f)
        let ownerLog = EventLog(owner)
        await owner.start()
        _ = try await ownerLog.waitFor(isState(.connected))
        let (family, familyLog, paired) = try await join(f, owner: owner, access: .family, label: "Kid")
        #expect(try await family.members().count == 2)
        await #expect(throws: RelayClientError.forbidden(code: "forbidden", message: "only an owner removes other members; DELETE your own token_id to leave")) {
            try await family.removeMember(paired.tokenID - 1)
        }
        try await family.leave()
        _ = try await familyLog.waitFor(timeout: 5) { if case .connection(.stopped(.revoked)) = $0 { true } else { false } }
        do {
            try await owner.leave()
            Issue.record("the last owner left")
        } catch RelayClientError.http(409, let code, _) {
            #expect(code == "last_owner")
        }
        // Bad input is the relay's clear error, typed.
        await #expect(throws: RelayClientError.self) {
            _ = try await owner.invite(access: .guest, label: "no end")  // a guest needs until
        }
        await owner.stop()
    }
}
