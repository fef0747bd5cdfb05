import Foundation
import Testing
import WimzProtocol

/// The shared protocol constants: every close code has its reconnect meaning, and the JSON other
/// clients check against parses and says the same.
@Suite struct WimzProtocolTests {
    @Test func closeCodesSayHowToReconnect() {
        #expect(CloseCode.reconnect(after: 1012) == .atOnce && CloseCode.reconnect(after: 1001) == .atOnce)
        #expect(CloseCode.reconnect(after: 4008) == .slowBackoff && CloseCode.reconnect(after: 4029) == .slowBackoff)
        #expect(CloseCode.reconnect(after: 4003) == .never && CloseCode.reconnect(after: 4001) == .never)
        #expect(CloseCode.reconnect(after: nil) == .backoff && CloseCode.reconnect(after: 1006) == .backoff)
    }

    @Test func theConstantsJSONParsesAndAgrees() throws {
        let json = try #require(try JSONSerialization.jsonObject(with: Data(WimzProtocol.constantsJSON.utf8)) as? [String: Any])
        let codes = try #require(json["close_codes"] as? [String: [String: Any]])
        #expect(codes.count == CloseCode.allCases.count)
        for code in CloseCode.allCases {
            #expect(codes["\(code)"]?["code"] as? Int == Int(code.rawValue))
            #expect(codes["\(code)"]?["reconnect"] as? String == code.reconnect.rawValue)
        }
        #expect(Set(json["replayed_events"] as? [String] ?? []) == WimzProtocol.replayedEvents)
        #expect((json["message_types"] as? [String])?.contains("http_request") == true)
        let errors = try #require(json["error_codes"] as? [String: Int])
        #expect(errors.count == ErrorCode.allCases.count && errors["device_offline"] == 503 && errors["wrong_role"] == 403)
        #expect(Set(json["push_kinds"] as? [String] ?? []) == Set(PushKind.allCases.map(\.rawValue)))
    }

    /// The robot library ships the constants as a file of its own; it must say what the module
    /// says (`scripts/generate.sh` rewrites it).
    @Test func thePythonLibrarysCopyIsTheModules() throws {
        let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
        let shipped = try Data(contentsOf: root.appendingPathComponent("clients/python/wimz_robot/protocol-constants.json"))
        let file = try #require(try JSONSerialization.jsonObject(with: shipped) as? NSDictionary)
        let module = try #require(try JSONSerialization.jsonObject(with: Data(WimzProtocol.constantsJSON.utf8)) as? NSDictionary)
        #expect(file == module, "clients/python/wimz_robot/protocol-constants.json: run scripts/generate.sh")
    }
}

@Suite struct WebSocketFrameTests {
    @Test func headersRoundTripAtEveryLengthBoundary() {
        for length in [0, 125, 126, 65535, 65536, 1 << 20] {
            for mask in [nil, [UInt8(1), 2, 3, 4]] {
                for fin in [true, false] {
                    let bytes = WebSocketFrame.header(opcode: WebSocketFrame.binary, payloadLength: length, fin: fin, mask: mask)
                    #expect(bytes.count == WebSocketFrame.headerSize(payloadLength: length, masked: mask != nil))
                    let header = bytes.withUnsafeBufferPointer(WebSocketFrame.readHeader)
                    #expect(header == WebSocketFrame.Header(fin: fin, opcode: WebSocketFrame.binary, masked: mask != nil,
                                                            payloadLength: length, size: bytes.count))
                    if let mask { #expect(Array(bytes.suffix(4)) == mask) }
                    // Any prefix is incomplete.
                    for cut in 0..<bytes.count { #expect(bytes.prefix(cut).withUnsafeBufferPointer(WebSocketFrame.readHeader) == nil) }
                }
            }
        }
    }

    @Test func theWireFormatIsRFC6455s() {
        #expect(WebSocketFrame.header(opcode: WebSocketFrame.text, payloadLength: 5) == [0x81, 5])
        #expect(WebSocketFrame.header(opcode: WebSocketFrame.ping, payloadLength: 300, fin: true, mask: [0, 0, 0, 0])
            == [0x89, 0x80 | 126, 1, 44, 0, 0, 0, 0])
        #expect(WebSocketFrame.header(opcode: 0, payloadLength: 70_000, fin: false) == [0x00, 127, 0, 0, 0, 0, 0, 1, 0x11, 0x70])
    }
}
