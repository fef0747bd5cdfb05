#if canImport(RelayCore)
import RelayCore
#endif
import WimzProtocol
import Foundation

/// The invariants the fuzz targets check (scripts/fuzz.sh builds them with libFuzzer) and the
/// test suite re-checks over the kept seed corpus and every crasher found (Tests/Fuzz/).
/// Each check returns nil, or what it found broken.
public enum FuzzChecks {
    public static let targets: [String: @Sendable ([UInt8]) -> String?] = [
        "request": { request($0) }, "envelope": { envelope($0) }, "json": { json($0) }, "config": { config($0) },
        "token": { token($0) }, "robotleg": { robotLeg($0) }, "appframe": { appFrame($0) },
        "base64": { base64($0) },
    ]

    /// The strict request parser: a definite answer within the limits, a complete head that
    /// re-parses the same from its own bytes, and nothing decoded that the rules refuse.
    public static func request(_ bytes: [UInt8]) -> String? {
        let limits = HTTPRequestHead.Limits()
        switch HTTPRequestHead.parse(bytes, limits: limits) {
        case .incomplete:
            let ceiling = limits.requestLine + limits.headerBytes + 8
            return bytes.count > ceiling ? "still incomplete after \(bytes.count) bytes" : nil
        case .invalid(let error):
            return [400, 414, 431, 505].contains(error.status) ? nil : "unexpected status \(error.status)"
        case .complete(let head, let length):
            guard length <= bytes.count, length >= 16 else { return "head length \(length) of \(bytes.count)" }
            guard head.path.hasPrefix("/") else { return "path \(head.path.debugDescription)" }
            let decoded = [head.path] + head.arguments.flatMap { [$0.name, $0.value] }
            if decoded.contains(where: { $0.unicodeScalars.contains { $0.value < 0x20 || $0.value == 0x7F } }) {
                return "control character decoded"
            }
            if head.headers.contains(where: { $0.value.unicodeScalars.contains { ($0.value < 0x20 && $0 != "\t") || $0.value == 0x7F } }) {
                return "control character in a header value"
            }
            for argument in head.arguments { _ = try? head.argument(argument.name) }
            guard case .complete(let again, length) = HTTPRequestHead.parse(Array(bytes[..<length]), limits: limits), again == head
            else { return "re-parse of the head differs" }
            return nil
        }
    }

    /// The strict Base64 decoder: what it accepts is the one encoding of what it returns, and
    /// everything the encoder writes decodes back.
    public static func base64(_ bytes: [UInt8]) -> String? {
        let text = String(decoding: bytes, as: UTF8.self)
        if let decoded = Base64.decode(text), Base64.encode(decoded) != text {
            return "accepted a second encoding: \(text.debugDescription)"
        }
        return Base64.decode(Base64.encode(bytes)) == bytes ? nil : "round trip of \(bytes.count) bytes differs"
    }

    /// The forwarding path's envelope scanner: ranges inside the message, and deterministic.
    public static func envelope(_ bytes: [UInt8]) -> String? {
        let envelope = Envelope.scan(bytes)
        for range in [envelope.eventName, envelope.id].compactMap({ $0 }) where range.lowerBound < 0 || range.upperBound > bytes.count {
            return "range \(range) outside \(bytes.count) bytes"
        }
        return Envelope.scan(bytes) == envelope ? nil : "scan is not deterministic"
    }

    /// The byte-level JSON writer against Foundation's parser: what it writes reads back the same.
    public static func json(_ bytes: [UInt8]) -> String? {
        let text = String(decoding: bytes, as: UTF8.self)
        let value = JSONValue.object([("s", .string(text)), ("n", .int(Int64(bytes.count) - 500)),
                                      ("a", .array([.string(String(text.prefix(3))), .bool(bytes.count % 2 == 0), .null]))])
        guard let parsed = try? JSONSerialization.jsonObject(with: Data(value.encodedBytes)) as? [String: Any] else {
            return "writer output is not JSON: \(String(decoding: value.encodedBytes, as: UTF8.self).debugDescription)"
        }
        guard parsed["s"] as? String == text else { return "string changed in the round trip" }
        guard (parsed["n"] as? NSNumber)?.int64Value == Int64(bytes.count) - 500 else { return "number changed" }
        return nil
    }

    /// Configuration values as operators type them: listen address, TURN URLs, device ids.
    public static func config(_ bytes: [UInt8]) -> String? {
        let text = String(decoding: bytes, as: UTF8.self)
        if let listen = RelayConfiguration.parseListen(text), listen.host.isEmpty || !(0...65535).contains(listen.port) {
            return "listen parsed to \(listen)"
        }
        let policy = TurnPolicy(urls: text.split(separator: ",").map(String.init), defaultTTL: 600, minTTL: 60, maxTTL: 6000,
                                separator: ":")
        if policy.stunURLs.contains(where: { !$0.hasPrefix("stun:") }) { return "STUN URL \(policy.stunURLs)" }
        if let id = DeviceID(text) {
            let ok = (1...64).contains(id.rawValue.utf8.count) && id.rawValue.utf8.allSatisfy { byte in
                (UInt8(ascii: "a")...UInt8(ascii: "z")).contains(byte) || (UInt8(ascii: "A")...UInt8(ascii: "Z")).contains(byte)
                    || (UInt8(ascii: "0")...UInt8(ascii: "9")).contains(byte) || "_.-".utf8.contains(byte)
            }
            if !ok { return "accepted device id \(id.rawValue.debugDescription)" }
        }
        return nil
    }

    /// Token handling: the bearer token from an Authorization value, and the log redaction of
    /// `token=` arguments (no token value may survive it).
    public static func token(_ bytes: [UInt8]) -> String? {
        let text = String(decoding: bytes, as: UTF8.self)
        if let token = Redaction.bearerToken(fromAuthorization: text), token.isEmpty || token.hasPrefix(" ") {
            return "bearer token \(token.debugDescription)"
        }
        // Bytes, not Characters: "&" followed by a combining mark is one Character but still the
        // separator on the wire.
        let out = Array(Redaction.redactQuery(text).utf8)
        let marker = Array("token=".utf8)
        var i = 0
        while i + marker.count <= out.count {
            guard out[i..<i + marker.count].elementsEqual(marker) else {
                i += 1
                continue
            }
            let value = out[(i + marker.count)...].prefix { $0 != UInt8(ascii: "&") }
            if !value.elementsEqual("REDACTED".utf8) {
                return "token value survived redaction: \(String(decoding: value, as: UTF8.self).debugDescription)"
            }
            i += marker.count
        }
        return nil
    }

    /// What a robot (or anything pretending to be one) sends back on the robot leg: the strict
    /// JSON reader and the answer-frame reader never fail open. A value the reader accepts
    /// reads back the same from its own encoding; an accepted answer has a real status and only
    /// headers that cannot break the response; a numbered copy is the message with `"seq":N,`
    /// put after its first `{` and nothing else changed.
    public static func robotLeg(_ bytes: [UInt8]) -> String? {
        if let value = try? JSONReader.parse(bytes) {
            guard let again = try? JSONReader.parse(value.encodedBytes), again == value else {
                return "reader round trip differs for \(String(decoding: bytes, as: UTF8.self).debugDescription)"
            }
        }
        if case .success(.response(_, let status, let headers, _, _)) = RobotHTTP.parse(bytes) {
            guard (200...599).contains(status) else { return "status \(status) accepted" }
            for header in headers where !RobotHTTP.isToken(header.name) || !RobotHTTP.isSafeValue(header.value) {
                return "unsafe header \(header.name.debugDescription): \(header.value.debugDescription)"
            }
        }
        if let numbering = Numbering.of(Payload(bytes), seq: 42) {
            let numbered = Payload(numbering.rendered(Payload(bytes)))
            // What the writer puts in by hand is what the rendering says.
            let insertion = [UInt8](unsafeUninitializedCapacity: numbering.insertionCount) { buffer, count in
                numbering.writeInsertion(to: buffer.baseAddress!)
                count = numbering.insertionCount
            }
            guard insertion == Array(#""seq":42"#.utf8) + (numbering.comma ? [UInt8(ascii: ",")] : []) else {
                return "insertion \(String(decoding: insertion, as: UTF8.self).debugDescription)"
            }
            let marker = Array(#""seq":42"#.utf8)
            guard let start = numbered.bytes.firstIndex(of: UInt8(ascii: "{")),
                  numbered.bytes[(start + 1)...].starts(with: marker) else { return "seq is not the first member" }
            var restored = Array(numbered.bytes[...start])
            var rest = numbered.bytes[(start + 1 + marker.count)...]
            if rest.first == UInt8(ascii: ",") { rest = rest.dropFirst() }
            restored += rest
            guard restored == bytes else { return "numbering changed the message" }
        }
        return nil
    }

    /// The strict app-frame check (docs/protocol.md v1.2) against an independent JSON parser
    /// (Foundation's): whatever the relay forwards or refuses as the relay's own, the parser reads
    /// as one object whose `type`, `id` and `event` are exactly what the relay routed by.
    /// (Where Foundation is stricter than the robot's parser — a lone UTF-16 surrogate escape, a
    /// number past Double's range — the input says nothing about agreement and is passed over.)
    public static func appFrame(_ bytes: [UInt8]) -> String? {
        let verdict = AppFrame.check(bytes)
        let envelope: Envelope
        switch verdict {
        case .malformed: return nil
        case .forbidden: envelope = .opaque
        case .accepted(let accepted): envelope = accepted
        }
        let text = String(decoding: bytes, as: UTF8.self)
        guard let parsed = (try? JSONSerialization.jsonObject(with: Data(bytes))) as? [String: Any] else {
            let exponent = zip(bytes, bytes.dropFirst()).contains { (0x30...0x39).contains($0) && ($1 | 0x20) == UInt8(ascii: "e") }
            let lenientHere = text.lowercased().contains("\\ud") || exponent
            return lenientHere ? nil : "accepted what a JSON parser refuses: \(text.debugDescription)"
        }
        func field(_ range: Range<Int>?) -> String? { range.map { String(decoding: bytes[$0], as: UTF8.self) } }
        let type = parsed["type"] as? String
        let relayOnly = Set(WimzProtocol.relayOnlyNames)
        let shouldForbid = type.map { relayOnly.contains($0) || ($0 == "event" && (parsed["event"] as? String).map(relayOnly.contains) == true) } ?? false
        if case .forbidden = verdict { return shouldForbid ? nil : "forbidden, but the parser reads type \(type ?? "nil")" }
        if shouldForbid { return "forwarded a frame the parser reads as the relay's: \(text.debugDescription)" }
        if parsed["type"] != nil, type == nil { return "type is not a string to the parser but was accepted" }
        switch envelope.kind {
        case .command, .response:
            guard type == (envelope.kind == .command ? "command" : "response") else { return "kind \(envelope.kind) but type \(type ?? "nil")" }
            let id = envelope.id.map { field(($0.lowerBound + 1)..<($0.upperBound - 1)) } ?? nil
            guard id == parsed["id"] as? String else { return "id \(id ?? "nil") but the parser reads \(parsed["id"] ?? "nil")" }
        case .event:
            guard type == "event", field(envelope.eventName) == parsed["event"] as? String else { return "event name differs" }
        default:
            if ["command", "response"].contains(type) { return "type \(type ?? "") not routed as such" }
            if type == "event", parsed["event"] is String { return "event not routed as an event" }
        }
        return nil
    }
}
