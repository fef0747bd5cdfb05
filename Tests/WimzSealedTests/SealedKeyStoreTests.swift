import Foundation
import Testing
@testable import WimzSealed

/// The app's key store on Linux (a 0600 file): one identity for good, epochs kept per device.
@Suite struct SealedKeyStoreTests {
    @Test func theIdentityAndEpochsOutliveTheProcessAndOthersCannotReadThem() throws {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("wimz-keys-\(UUID().uuidString)")
        defer { try? FileManager.default.removeItem(at: directory) }
        let store = FileSealedKeyStore(url: directory.appendingPathComponent("keys/sealed.json"))
        let identity = try store.identity()
        #expect(try store.identity().kid == identity.kid)  // made once
        let mode = try FileManager.default.attributesOfItem(atPath: store.url.path)[.posixPermissions] as? NSNumber
        #expect(mode?.intValue == 0o600)

        let robot = SealedIdentity()
        func epoch(_ number: Int, _ byte: UInt8) throws -> Epoch {
            let roster = try Roster.make(deviceID: "dev1", epoch: number, previousHash: nil, made: 0, robot: robot.publicKeys,
                                         members: [RosterMember(keys: identity.publicKeys, role: .owner, control: true, until: nil, label: "")])
            return try Epoch(roster: roster, secret: Data(repeating: byte, count: 32))
        }
        try store.keep(try epoch(2, 2), of: "dev1")
        try store.keep(try epoch(1, 1), of: "dev1")
        try store.keep(try epoch(2, 7), of: "dev1")  // the same epoch again replaces it
        let kept = try FileSealedKeyStore(url: store.url).epochs(of: "dev1")
        #expect(kept.map(\.number) == [1, 2] && kept[1].secretBytes == Data(repeating: 7, count: 32))
        #expect(try store.epochs(of: "dev2").isEmpty)
        let keptMode = try FileManager.default.attributesOfItem(atPath: store.url.path)[.posixPermissions] as? NSNumber
        #expect(keptMode?.intValue == 0o600)

        try FileManager.default.setAttributes([.posixPermissions: 0o644], ofItemAtPath: store.url.path)
        #expect(throws: SealedError.self) { try store.identity() }
    }
}
