import WimzProtocol

/// What an app may send (docs/protocol.md v1.2 "Frames on the sockets"): the relay reads
/// an app frame's `type`, `id` and `event` to route it and the robot reads the whole frame with a
/// full JSON parser, so the relay forwards only frames both must read the same way:
///
/// - one JSON object (RFC 8259 grammar, valid UTF-8, nesting at most `maxDepth` deep) and
///   nothing after it but white space;
/// - top-level member names unique and without escape sequences (a parser that keeps the last
///   duplicate, or decodes `\u0074ype`, would otherwise see another `type` than the relay);
/// - `type`, `id` and `event`, where present, strings without escape sequences;
/// - no name only the relay speaks (`WimzProtocol.relayOnlyNames`) as `type`, nor as `event`
///   of an `event`.
///
/// The check walks the bytes once without decoding or allocating (frames with more than
/// `inlineNames` top-level members excepted). Binary frames are not JSON and go verbatim.
public enum AppFrame {
    public enum Verdict: Equatable {
        /// Forward it; the envelope gives the routing fields.
        case accepted(Envelope)
        /// `bad_message`, with what was wrong.
        case malformed(String)
        /// `forbidden_type`: the frame speaks for the relay.
        case forbidden
    }

    /// Deeper nesting is refused: a recursive parser on the robot (Python's `json`) would fail
    /// with a recursion error instead of a decoding error.
    public static let maxDepth = 64
    /// Top-level names kept on the stack for the uniqueness check; more go to the heap.
    static let inlineNames = 32

    public static func check(_ bytes: [UInt8]) -> Verdict {
        bytes.withUnsafeBufferPointer { check($0) }
    }

    public static func check(_ bytes: UnsafeBufferPointer<UInt8>) -> Verdict {
        withUnsafeTemporaryAllocation(of: NameRef.self, capacity: inlineNames) { names in
            var validator = Validator(bytes: bytes, names: names)
            return validator.run()
        }
    }

    /// The names an app may not use, as bytes (matched without hashing).
    static let relayOnly: [[UInt8]] = WimzProtocol.relayOnlyNames.map { Array($0.utf8) }

    /// A top-level member name: its byte range and a hash of its bytes (computed only for
    /// names past `inlineNames`, where pairwise comparison would cost too much).
    struct NameRef {
        var range: Range<Int>
        var hash: UInt64
    }

    struct Validator {
        let bytes: UnsafeBufferPointer<UInt8>
        let names: UnsafeMutableBufferPointer<NameRef>
        var nameCount = 0
        var overflow: [NameRef] = []
        var i = 0
        var error: StaticString?
        /// Whether the string token `string()` read last had an escape sequence.
        var escaped = false

        init(bytes: UnsafeBufferPointer<UInt8>, names: UnsafeMutableBufferPointer<NameRef>) {
            self.bytes = bytes
            self.names = names
        }

        mutating func run() -> Verdict {
            // The routed members' value tokens; a negative range: present, but not a plain string.
            var type: Range<Int>?
            var event: Range<Int>?
            var id: Range<Int>?
            skipSpace()
            guard consume(UInt8(ascii: "{")) else { return .malformed("a text frame must be one JSON object") }
            skipSpace()
            if !consume(UInt8(ascii: "}")) {
                repeat {
                    skipSpace()
                    guard let name = string() else { return fail("a member name must be a JSON string") }
                    guard !escaped else { return .malformed("member names may not contain escape sequences") }
                    guard remember(name) else { return .malformed("a member name appears twice") }
                    skipSpace()
                    guard consume(UInt8(ascii: ":")) else { return fail("expected ':' after a member name") }
                    skipSpace()
                    let start = i
                    guard value(depth: 1) else { return fail("malformed JSON value") }
                    // Routed values: a string token without escapes, or (-1) anything else.
                    let range = bytes[start] == UInt8(ascii: "\"") && !escaped ? start..<i : -1..<(-1)
                    switch name.count {
                    case 2 where equals(name, "id"): id = range
                    case 4 where equals(name, "type"): type = range
                    case 5 where equals(name, "event"): event = range
                    // The relay's own `from` (v1.3) would be a second one at a robot that opted in.
                    case 4 where equals(name, "from"): return .malformed("from is the relay's: an app may not send it")
                    default: break
                    }
                    skipSpace()
                } while consume(UInt8(ascii: ","))
                guard consume(UInt8(ascii: "}")) else { return fail("expected ',' or '}' in the object") }
            }
            skipSpace()
            guard i == bytes.count else { return .malformed("nothing may follow the JSON object") }
            if !isPlainString(type) { return .malformed("type must be a string without escape sequences") }
            if !isPlainString(id) { return .malformed("id must be a string without escape sequences") }
            if !isPlainString(event) { return .malformed("event must be a string without escape sequences") }
            guard let type else { return .accepted(Envelope(kind: .other, eventName: nil, id: nil)) }
            let typeName = (type.lowerBound + 1)..<(type.upperBound - 1)
            let eventName = event.map { ($0.lowerBound + 1)..<($0.upperBound - 1) }
            if isRelayOnly(typeName) { return .forbidden }
            if equals(typeName, "event") {
                guard let eventName else { return .accepted(Envelope(kind: .other, eventName: nil, id: nil)) }
                if isRelayOnly(eventName) { return .forbidden }
                return .accepted(Envelope(kind: .event, eventName: eventName, id: nil))
            }
            if equals(typeName, "command") { return .accepted(Envelope(kind: .command, eventName: nil, id: id)) }
            if equals(typeName, "response") { return .accepted(Envelope(kind: .response, eventName: nil, id: id)) }
            if equals(typeName, "sealed") { return .accepted(Envelope(kind: .sealed, eventName: nil, id: nil)) }
            return .accepted(Envelope(kind: .other, eventName: nil, id: nil))
        }

        /// True for an absent member, or a string token with no escape sequence.
        private func isPlainString(_ token: Range<Int>?) -> Bool { token.map { $0.lowerBound >= 0 } ?? true }

        private func fail(_ fallback: StaticString) -> Verdict {
            .malformed((error ?? fallback).description)
        }

        // MARK: Top-level names

        /// Records a name; false when an equal one was seen before.
        private mutating func remember(_ name: Range<Int>) -> Bool {
            for k in 0..<nameCount where same(names[k].range, name) { return false }
            if nameCount < names.count {
                names[nameCount] = NameRef(range: name, hash: 0)
                nameCount += 1
                return true
            }
            var hash: UInt64 = 0xcbf2_9ce4_8422_2325  // FNV-1a
            for k in name { hash = (hash ^ UInt64(bytes[k])) &* 0x100_0000_01b3 }
            for other in overflow where other.hash == hash && same(other.range, name) { return false }
            overflow.append(NameRef(range: name, hash: hash))
            return true
        }

        private func same(_ a: Range<Int>, _ b: Range<Int>) -> Bool {
            guard a.count == b.count, a.isEmpty || bytes[a.lowerBound] == bytes[b.lowerBound] else { return false }
            for k in 0..<a.count where bytes[a.lowerBound + k] != bytes[b.lowerBound + k] { return false }
            return true
        }

        private func isRelayOnly(_ range: Range<Int>) -> Bool {
            AppFrame.relayOnly.contains { name in
                name.count == range.count && name.indices.allSatisfy { bytes[range.lowerBound + $0] == name[$0] }
            }
        }

        private func equals(_ range: Range<Int>, _ text: StaticString) -> Bool {
            guard range.count == text.utf8CodeUnitCount else { return false }
            let p = text.utf8Start
            for k in 0..<range.count where bytes[range.lowerBound + k] != p[k] { return false }
            return true
        }

        // MARK: RFC 8259 grammar

        private mutating func skipSpace() {
            while i < bytes.count {
                switch bytes[i] {
                case 0x20, 0x09, 0x0A, 0x0D: i += 1
                default: return
                }
            }
        }

        private mutating func consume(_ c: UInt8) -> Bool {
            guard i < bytes.count, bytes[i] == c else { return false }
            i += 1
            return true
        }

        /// One value of any kind, nested containers included.
        private mutating func value(depth: Int) -> Bool {
            guard i < bytes.count else { return false }
            switch bytes[i] {
            case UInt8(ascii: "\""): return string() != nil
            case UInt8(ascii: "{"), UInt8(ascii: "["):
                guard depth < AppFrame.maxDepth else {
                    error = "nested deeper than 64 levels"
                    return false
                }
                return container(depth: depth + 1)
            case UInt8(ascii: "t"): return literal("true")
            case UInt8(ascii: "f"): return literal("false")
            case UInt8(ascii: "n"): return literal("null")
            default: return number()
            }
        }

        private mutating func container(depth: Int) -> Bool {
            let isObject = bytes[i] == UInt8(ascii: "{")
            let close = isObject ? UInt8(ascii: "}") : UInt8(ascii: "]")
            i += 1
            skipSpace()
            if consume(close) { return true }
            repeat {
                skipSpace()
                if isObject {
                    guard string() != nil else { return false }
                    skipSpace()
                    guard consume(UInt8(ascii: ":")) else { return false }
                    skipSpace()
                }
                guard value(depth: depth) else { return false }
                skipSpace()
            } while consume(UInt8(ascii: ","))
            return consume(close)
        }

        private mutating func literal(_ text: StaticString) -> Bool {
            let n = text.utf8CodeUnitCount
            guard bytes.count - i >= n, equals(i..<(i + n), text) else { return false }
            i += n
            return true
        }

        /// `-? (0 | [1-9][0-9]*) (. [0-9]+)? ([eE] [+-]? [0-9]+)?`
        private mutating func number() -> Bool {
            _ = consume(UInt8(ascii: "-"))
            guard i < bytes.count, isDigit(bytes[i]) else { return false }
            if bytes[i] == UInt8(ascii: "0") { i += 1 } else { skipDigits() }
            if consume(UInt8(ascii: ".")) {
                guard i < bytes.count, isDigit(bytes[i]) else { return false }
                skipDigits()
            }
            if consume(UInt8(ascii: "e")) || consume(UInt8(ascii: "E")) {
                if !consume(UInt8(ascii: "+")) { _ = consume(UInt8(ascii: "-")) }
                guard i < bytes.count, isDigit(bytes[i]) else { return false }
                skipDigits()
            }
            return true
        }

        private func isDigit(_ c: UInt8) -> Bool { c >= 0x30 && c <= 0x39 }

        private mutating func skipDigits() {
            var k = i
            let end = bytes.count
            while k < end, isDigit(bytes[k]) { k += 1 }
            i = k
        }

        /// A string token: valid escapes, no control characters, valid UTF-8. Returns the range
        /// of its raw contents.
        private mutating func string() -> Range<Int>? {
            guard consume(UInt8(ascii: "\"")) else { return nil }
            escaped = false
            let start = i
            while i < bytes.count {
                // Plain ASCII runs in a local index (the common case: no escape, no UTF-8).
                var k = i
                let end = bytes.count
                while k < end {
                    let c = bytes[k]
                    guard c >= 0x20, c < 0x80, c != UInt8(ascii: "\""), c != UInt8(ascii: "\\") else { break }
                    k += 1
                }
                i = k
                guard k < end else { break }
                let c = bytes[k]
                switch c {
                case UInt8(ascii: "\""):
                    i += 1
                    return start..<(i - 1)
                case UInt8(ascii: "\\"):
                    escaped = true
                    guard escape() else { return nil }
                case 0x80...:
                    let length = UTF8Text.sequenceLength(bytes, at: i)
                    guard length > 0 else {
                        error = "text frames must be valid UTF-8"
                        return nil
                    }
                    i += length
                default:
                    error = "control characters must be escaped in JSON strings"
                    return nil
                }
            }
            return nil
        }

        private mutating func escape() -> Bool {
            guard i + 1 < bytes.count else { return false }
            switch bytes[i + 1] {
            case UInt8(ascii: "\""), UInt8(ascii: "\\"), UInt8(ascii: "/"), UInt8(ascii: "b"), UInt8(ascii: "f"),
                 UInt8(ascii: "n"), UInt8(ascii: "r"), UInt8(ascii: "t"):
                i += 2
                return true
            case UInt8(ascii: "u"):
                guard bytes.count - i >= 6 else { return false }
                for k in (i + 2)..<(i + 6) where !bytes[k].isHexDigit { return false }
                i += 6
                return true
            default:
                return false
            }
        }
    }
}
