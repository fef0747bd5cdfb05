import Testing
@testable import RelayCore

/// The sealed household's bodies as the relay reads them (`SealedRules`), without a database or a
/// socket: what it accepts, what it refuses with 400, and the one digest it is handed.
@Suite struct SealedRulesTests {
    private func b64(_ bytes: [UInt8]) -> String { Base64.encodeURLSafe(bytes) }

    @Test func aMemberKeyIsTwoRawKeysAndItsKidTheirDigestsFirstSixteenBytes() throws {
        let sign = [UInt8](repeating: 1, count: 32), hpke = [UInt8](repeating: 2, count: 32)
        var hashed: [[UInt8]] = []
        let digest: ([UInt8]) -> [UInt8] = { hashed.append($0); return Array(0..<32) }
        let key = try SealedRules.memberKey(Array(#"{"sign":"\#(b64(sign))","hpke":"\#(b64(hpke))"}"#.utf8), appTokenID: 9, sha256: digest)
        #expect(hashed == [sign + hpke])
        #expect(key == .init(appTokenID: 9, kid: "000102030405060708090a0b0c0d0e0f", sign: b64(sign), hpke: b64(hpke)))
        for body in [#"{"sign":"\#(b64(sign))"}"#, #"{"sign":"\#(b64(Array(sign.prefix(31))))","hpke":"\#(b64(hpke))"}"#, "[]", "{"] {
            #expect(throws: RelayError.self) { try SealedRules.memberKey(Array(body.utf8), appTokenID: 9, sha256: digest) }
        }
    }

    @Test func anUploadedEpochHasOnePackagePerMemberOfItsDevicesRoster() throws {
        let kids = ["0123456789abcdef0123456789abcdef", "fedcba9876543210fedcba9876543210"]
        let roster = b64(Array(#"{"device_id":"d1","epoch":2,"members":[{"kid":"\#(kids[0])"},{"kid":"\#(kids[1])"}]}"#.utf8))
        let signature = b64([UInt8](repeating: 7, count: 64)), sealed = b64([UInt8](repeating: 8, count: 80))
        func body(_ packages: [String]) -> [UInt8] {
            Array(("{\"roster\":{\"roster\":\"\(roster)\",\"by\":\"\(kids[0])\",\"sig\":\"\(signature)\"},\"robot_sig\":\"\(signature)\","
                + "\"packages\":[" + packages.map { "{\"kid\":\"\($0)\",\"sealed\":\"\(sealed)\"}" }.joined(separator: ",") + "]}").utf8)
        }
        let upload = try SealedRules.epochUpload(body(kids), device: DeviceID("d1")!, epoch: 2)
        #expect(upload.epoch == 2 && upload.packages.map(\.kid) == kids && upload.signedBy == kids[0])
        #expect(throws: RelayError.self) { try SealedRules.epochUpload(body([kids[0]]), device: DeviceID("d1")!, epoch: 2) }
        #expect(throws: RelayError.self) { try SealedRules.epochUpload(body(kids), device: DeviceID("d2")!, epoch: 2) }
        #expect(throws: RelayError.self) { try SealedRules.epochUpload(body(kids), device: DeviceID("d1")!, epoch: 3) }
    }
}
