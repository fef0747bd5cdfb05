/// What the relay needs to know of a frame, found without decoding it: the top-level `type`,
/// and for events the `event` name, for commands, responses and the robot's HTTP answers the
/// `id` token's byte range.
///
/// Wire format (PROTOCOL.md "Frames"): text frames are JSON objects such as
/// `{"type":"event","event":"mode_changed","data":{…}}` or `{"type":"command","id":"7",…}`.
/// Everything else in the frame is forwarded byte for byte, so the scanner only walks the
/// top-level keys, skips nested values without looking inside, and stops as soon as it has
/// what the frame's type needs.
public struct Envelope: Equatable, Sendable {
    public enum Kind: Equatable, Sendable {
        case event, command, response
        /// The robot's answer to an `http_request` (PROTOCOL.md v1.1), and its continuation.
        case httpResponse, httpBody
        /// The relay's own request on the robot leg; an app may not send one.
        case httpRequest
        /// A JSON object with another (or no) `type`.
        case other
        /// Not a JSON object (or binary): forwarded verbatim.
        case opaque
    }

    public var kind: Kind
    /// Byte range of the event name's characters (inside the quotes), for `.event`.
    public var eventName: Range<Int>?
    /// Byte range of the whole `id` value token (with quotes if a string), for commands/responses.
    public var id: Range<Int>?

    public static let opaque = Envelope(kind: .opaque, eventName: nil, id: nil)

    /// Scans `bytes`. Never fails: malformed input is `.opaque` (or `.other` when the damage is
    /// after the fields the kind needs).
    public static func scan(_ bytes: UnsafeBufferPointer<UInt8>) -> Envelope {
        var scanner = Scanner(bytes: bytes)
        return scanner.run()
    }

    public static func scan(_ bytes: [UInt8]) -> Envelope {
        bytes.withUnsafeBufferPointer { scan($0) }
    }

    struct Scanner {
        let bytes: UnsafeBufferPointer<UInt8>
        var i = 0

        init(bytes: UnsafeBufferPointer<UInt8>) { self.bytes = bytes }

        mutating func run() -> Envelope {
            skipSpace()
            guard consume(UInt8(ascii: "{")) else { return .opaque }
            var type: Range<Int>?
            var event: Range<Int>?
            var id: Range<Int>?
            var first = true
            while true {
                skipSpace()
                if consume(UInt8(ascii: "}")) { break }
                if !first {
                    guard consume(UInt8(ascii: ",")) else { return envelope(type, event, id, complete: false) }
                    skipSpace()
                }
                first = false
                guard let key = string() else { return envelope(type, event, id, complete: false) }
                skipSpace()
                guard consume(UInt8(ascii: ":")) else { return envelope(type, event, id, complete: false) }
                skipSpace()
                let valueStart = i
                guard skipValue() else { return envelope(type, event, id, complete: false) }
                let value = valueStart..<i
                if equals(key, "type") {
                    type = value
                } else if equals(key, "event") {
                    event = value
                } else if equals(key, "id") {
                    id = value
                }
                if let type, done(type, event, id) { return envelope(type, event, id, complete: true) }
            }
            return envelope(type, event, id, complete: true)
        }

        /// Whether the fields the type needs have been seen.
        func done(_ type: Range<Int>, _ event: Range<Int>?, _ id: Range<Int>?) -> Bool {
            if isString(type, "event") { return event != nil }
            if isString(type, "command") || isString(type, "response") || isString(type, "http_response")
                || isString(type, "http_body") { return id != nil }
            return true
        }

        func envelope(_ type: Range<Int>?, _ event: Range<Int>?, _ id: Range<Int>?, complete: Bool) -> Envelope {
            guard let type else { return complete ? Envelope(kind: .other, eventName: nil, id: nil) : .opaque }
            if isString(type, "event") {
                guard let event, bytes[event.lowerBound] == UInt8(ascii: "\"") else {
                    return Envelope(kind: .other, eventName: nil, id: nil)
                }
                return Envelope(kind: .event, eventName: (event.lowerBound + 1)..<(event.upperBound - 1), id: nil)
            }
            if isString(type, "command") { return Envelope(kind: .command, eventName: nil, id: id) }
            if isString(type, "response") { return Envelope(kind: .response, eventName: nil, id: id) }
            if isString(type, "http_response") { return Envelope(kind: .httpResponse, eventName: nil, id: id) }
            if isString(type, "http_body") { return Envelope(kind: .httpBody, eventName: nil, id: id) }
            if isString(type, "http_request") { return Envelope(kind: .httpRequest, eventName: nil, id: nil) }
            return Envelope(kind: .other, eventName: nil, id: nil)
        }

        /// True if the token at `range` is the JSON string `"text"` (no escapes).
        func isString(_ range: Range<Int>, _ text: StaticString) -> Bool {
            guard range.count == text.utf8CodeUnitCount + 2, bytes[range.lowerBound] == UInt8(ascii: "\"") else {
                return false
            }
            return equals((range.lowerBound + 1)..<(range.upperBound - 1), text)
        }

        func equals(_ range: Range<Int>, _ text: StaticString) -> Bool {
            guard range.count == text.utf8CodeUnitCount else { return false }
            let p = text.utf8Start
            for k in 0..<range.count where bytes[range.lowerBound + k] != p[k] { return false }
            return true
        }

        mutating func skipSpace() {
            while i < bytes.count {
                switch bytes[i] {
                case 0x20, 0x09, 0x0A, 0x0D: i += 1
                default: return
                }
            }
        }

        mutating func consume(_ c: UInt8) -> Bool {
            guard i < bytes.count, bytes[i] == c else { return false }
            i += 1
            return true
        }

        /// A string token; returns the range of its raw contents (escapes left as they are).
        mutating func string() -> Range<Int>? {
            guard consume(UInt8(ascii: "\"")) else { return nil }
            let start = i
            while i < bytes.count {
                switch bytes[i] {
                case UInt8(ascii: "\""):
                    i += 1
                    return start..<(i - 1)
                case UInt8(ascii: "\\"):
                    i += 2
                default:
                    i += 1
                }
            }
            return nil
        }

        /// Skips one value of any kind; objects and arrays by bracket depth, honouring strings.
        mutating func skipValue() -> Bool {
            guard i < bytes.count else { return false }
            switch bytes[i] {
            case UInt8(ascii: "\""):
                return string() != nil
            case UInt8(ascii: "{"), UInt8(ascii: "["):
                var depth = 0
                while i < bytes.count {
                    switch bytes[i] {
                    case UInt8(ascii: "\""):
                        guard string() != nil else { return false }
                        continue
                    case UInt8(ascii: "{"), UInt8(ascii: "["):
                        depth += 1
                    case UInt8(ascii: "}"), UInt8(ascii: "]"):
                        depth -= 1
                        if depth == 0 {
                            i += 1
                            return true
                        }
                    default:
                        break
                    }
                    i += 1
                }
                return false
            default:
                // number, true, false, null: up to the next delimiter
                let start = i
                while i < bytes.count {
                    switch bytes[i] {
                    case UInt8(ascii: ","), UInt8(ascii: "}"), UInt8(ascii: "]"), 0x20, 0x09, 0x0A, 0x0D:
                        return i > start
                    default:
                        i += 1
                    }
                }
                return i > start
            }
        }
    }
}
