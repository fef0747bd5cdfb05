import Testing
@testable import RelayCore

@Suite struct UUIDValueTests {
    @Test func theTextFormRoundTripsInOrder() throws {
        let id = try #require(UUIDValue("00112233-4455-6677-8899-aabbccddeeff"))
        #expect(id.high == 0x0011_2233_4455_6677 && id.low == 0x8899_aabb_ccdd_eeff)
        #expect(id.description == "00112233-4455-6677-8899-aabbccddeeff")
        var bytes: [UInt8] = []
        id.append(to: &bytes)
        #expect(bytes == [0x00, 0x11, 0x22, 0x33, 0x44, 0x55, 0x66, 0x77, 0x88, 0x99, 0xAA, 0xBB, 0xCC, 0xDD, 0xEE, 0xFF])
        #expect(UUIDValue("0192A0B4-5C6D-7E8F-9A0B-1C2D3E4F5A6B") == UUIDValue("0192a0b4-5c6d-7e8f-9a0b-1c2d3e4f5a6b"))
        #expect(UUIDValue(high: .max, low: 0).description == "ffffffff-ffff-ffff-0000-000000000000")
    }

    @Test(arguments: ["", "0192a0b45c6d7e8f9a0b1c2d3e4f5a6b", "0192a0b4-5c6d-7e8f-9a0b-1c2d3e4f5a6", "0192a0b4-5c6d-7e8f-9a0b_1c2d3e4f5a6b",
                      "0192a0b4-5c6d-7e8f-9a0b-1c2d3e4f5a6g", "0192a0b4-5c6d-7e8f-9a0b-1c2d3e4f5a6bb", "0190-not-a-uuid",
                      "0192a0b4-5c6d-7e8f-9a0b1-c2d3e4f5a6b", " 192a0b4-5c6d-7e8f-9a0b-1c2d3e4f5a6b", "0192a0b4-5c6d-7e8f-9a0b-1c2d3e4f5a6é"])
    func anythingElseIsNoUUID(_ text: String) {
        #expect(UUIDValue(text) == nil)
    }
}
