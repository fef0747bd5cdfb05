#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// What the relay needs to know of a frame, found without decoding it: the top-level `type`,
/// and for events the `event` name, for commands, responses and the robot's HTTP answers the
/// `id` token's byte range.
///
/// Wire format (docs/protocol.md "Frames on the sockets"): text frames are JSON objects such as
/// `{"type":"event","event":"mode_changed","data":{…}}` or `{"type":"command","id":"7",…}`.
/// Everything else in the frame is forwarded byte for byte, so the scanner only walks the
/// top-level keys, skips nested values without looking inside, and stops as soon as it has
/// what the frame's type needs.
public struct Envelope: Equatable, Sendable {
    public enum Kind: Equatable, Sendable {
        case event, command, response
        /// The robot's answer to an `http_request` (docs/protocol.md v1.1), and its continuation.
        case httpResponse, httpBody
        /// The relay's own request on the robot leg; an app may not send one.
        case httpRequest
        /// v1.5: a sealed frame (`"type":"sealed"`), and the one frame a sealed device's robot
        /// leaves in clear for the lock screen (`"type":"lock_screen"`).
        case sealed, lockScreen
        /// v1.6: the robot says which settings it now runs (the relay's to store, never an app's).
        case settingsApplied
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
        if let event = compactEvent(bytes) { return event }
        var scanner = Scanner(bytes: bytes)
        return scanner.run()
    }

    /// `{"type":"event","event":"`: how the robot library (and any compact JSON writer that keeps
    /// key order) begins every event. A StaticString: its bytes are a constant, no array to reach.
    static var compactEventPrefix: StaticString { #"{"type":"event","event":""# }

    /// The fast path for events written as the robot library writes them: the prefix, then a
    /// name without escapes up to its closing quote — the same envelope the scanner finds (it
    /// stops at the same place), for a third of its cost. Anything else: nil, and the scanner runs.
    static func compactEvent(_ bytes: UnsafeBufferPointer<UInt8>) -> Envelope? {
        let prefix = compactEventPrefix
        guard bytes.count > prefix.utf8CodeUnitCount, let base = bytes.baseAddress,
              memcmp(base, prefix.utf8Start, prefix.utf8CodeUnitCount) == 0 else { return nil }
        let start = prefix.utf8CodeUnitCount
        // The closing quote and "no backslash before it", each found with memchr (vectorised; a
        // byte-by-byte switch cost ~7 instructions a byte of the name).
        guard let quote = memchr(base + start, Int32(UInt8(ascii: "\"")), bytes.count - start) else { return nil }
        let end = UnsafeRawPointer(quote) - UnsafeRawPointer(base)
        guard memchr(base + start, Int32(UInt8(ascii: "\\")), end - start) == nil else { return nil }
        return Envelope(kind: .event, eventName: start..<end, id: nil)
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
            // The type's kind is decided once, when its value is seen (nil: no `type` yet).
            var kind: Kind?
            var event: Range<Int>?
            var id: Range<Int>?
            // A sealed frame's `kind` (v1.5): all the relay reads of its contents, read as its event name.
            var sealedKind: Range<Int>?
            var first = true
            while true {
                skipSpace()
                if consume(UInt8(ascii: "}")) { break }
                if !first {
                    guard consume(UInt8(ascii: ",")) else { return envelope(kind, event, id, complete: false) }
                    skipSpace()
                }
                first = false
                guard let key = string() else { return envelope(kind, event, id, complete: false) }
                skipSpace()
                guard consume(UInt8(ascii: ":")) else { return envelope(kind, event, id, complete: false) }
                skipSpace()
                let valueStart = i
                guard skipValue() else { return envelope(kind, event, id, complete: false) }
                let value = valueStart..<i
                switch key.count {
                case 4 where equals(key, "type"): kind = self.kind(ofType: value)
                case 4 where equals(key, "kind"): sealedKind = value
                case 5 where equals(key, "event"): event = value
                case 2 where equals(key, "id"): id = value
                default: break
                }
                guard let kind else { continue }
                switch kind {
                case .event: if event != nil { return envelope(kind, event, id, complete: true) }
                case .command, .response, .httpResponse, .httpBody: if id != nil { return envelope(kind, event, id, complete: true) }
                case .sealed: if sealedKind != nil { return envelope(kind, sealedKind, id, complete: true) }
                default: return envelope(kind, event, id, complete: true)
                }
            }
            return envelope(kind, kind == .sealed ? sealedKind : event, id, complete: true)
        }

        /// The kind a `type` value token names: one of the known strings (no escapes), else `.other`.
        func kind(ofType value: Range<Int>) -> Kind {
            guard value.count >= 2, bytes[value.lowerBound] == UInt8(ascii: "\"") else { return .other }
            let text = (value.lowerBound + 1)..<(value.upperBound - 1)
            switch text.count {
            case 5 where equals(text, "event"): return .event
            case 6 where equals(text, "sealed"): return .sealed
            case 11 where equals(text, "lock_screen"): return .lockScreen
            case 7 where equals(text, "command"): return .command
            case 8 where equals(text, "response"): return .response
            case 9 where equals(text, "http_body"): return .httpBody
            case 12 where equals(text, "http_request"): return .httpRequest
            case 13 where equals(text, "http_response"): return .httpResponse
            case 16 where equals(text, "settings_applied"): return .settingsApplied
            default: return .other
            }
        }

        /// The envelope for what was seen; `complete` is false when the object broke off early.
        func envelope(_ kind: Kind?, _ event: Range<Int>?, _ id: Range<Int>?, complete: Bool) -> Envelope {
            guard let kind else { return complete ? Envelope(kind: .other, eventName: nil, id: nil) : .opaque }
            switch kind {
            case .event:
                guard let event, bytes[event.lowerBound] == UInt8(ascii: "\"") else {
                    return Envelope(kind: .other, eventName: nil, id: nil)
                }
                return Envelope(kind: .event, eventName: (event.lowerBound + 1)..<(event.upperBound - 1), id: nil)
            case .command, .response, .httpResponse, .httpBody: return Envelope(kind: kind, eventName: nil, id: id)
            case .sealed:
                // The kind, when it is a plain string: what pushes and the replay go by.
                guard let event, event.count >= 2, bytes[event.lowerBound] == UInt8(ascii: "\""),
                      memchr(bytes.baseAddress! + event.lowerBound + 1, Int32(UInt8(ascii: "\\")), event.count - 2) == nil
                else { return Envelope(kind: .sealed, eventName: nil, id: nil) }
                return Envelope(kind: .sealed, eventName: (event.lowerBound + 1)..<(event.upperBound - 1), id: nil)
            default: return Envelope(kind: kind, eventName: nil, id: nil)
            }
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
        /// The closing quote is found with memchr, and checked for a backslash before it only
        /// when the string has one: a long value (a padded event, a settings document's text)
        /// costs a fraction of an instruction a byte instead of a comparison a byte.
        mutating func string() -> Range<Int>? {
            guard consume(UInt8(ascii: "\"")) else { return nil }
            let start = i, base = bytes.baseAddress!
            while i < bytes.count {
                guard let quote = memchr(base + i, Int32(UInt8(ascii: "\"")), bytes.count - i) else { return nil }
                let end = base.distance(to: quote.assumingMemoryBound(to: UInt8.self))
                guard let slash = memchr(base + i, Int32(UInt8(ascii: "\\")), end - i) else {
                    i = end + 1
                    return start..<end
                }
                i = base.distance(to: slash.assumingMemoryBound(to: UInt8.self)) + 2  // the escaped byte, whatever it is
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

extension Envelope {
    /// The byte range of the value of the top-level member `name` (its first occurrence, the name
    /// without escapes), as sent: what the relay keeps of a frame it stores without decoding it
    /// again (a settings document, v1.6). Nil when the object has no such member or is malformed
    /// before it.
    public static func memberValue(_ name: StaticString, in bytes: UnsafeBufferPointer<UInt8>) -> Range<Int>? {
        var scanner = Scanner(bytes: bytes)
        var found: Range<Int>?
        _ = scanner.members { key, scanner in
            let start = scanner.i
            guard scanner.skipValue() else { return false }
            if scanner.equals(key, name) { found = start..<scanner.i }
            return found == nil
        }
        return found
    }

    /// The byte range of the value of member `inner` of the top-level object member `outer`
    /// (`data.status`), found in one pass; nil when there is none or `outer` is malformed.
    public static func memberValue(_ outer: StaticString, _ inner: StaticString, in bytes: UnsafeBufferPointer<UInt8>) -> Range<Int>? {
        var scanner = Scanner(bytes: bytes)
        var found: Range<Int>?
        _ = scanner.members { key, scanner in
            guard scanner.equals(key, outer), scanner.i < bytes.count, bytes[scanner.i] == UInt8(ascii: "{") else { return scanner.skipValue() }
            let ok = scanner.members { key, scanner in
                let start = scanner.i
                guard scanner.skipValue() else { return false }
                if found == nil, scanner.equals(key, inner) { found = start..<scanner.i }
                return true
            }
            if !ok { found = nil }  // a value in an object cut short is no value
            return ok && found == nil
        }
        return found
    }
}

extension Envelope.Scanner {
    /// Walks the object at the cursor, calling `each` with every member's key (the cursor at its
    /// value, which `each` consumes); `each` returns false to stop. False when the object is
    /// malformed before the end, or `each` stopped.
    mutating func members(_ each: (Range<Int>, inout Envelope.Scanner) -> Bool) -> Bool {
        skipSpace()
        guard consume(UInt8(ascii: "{")) else { return false }
        var first = true
        while true {
            skipSpace()
            if consume(UInt8(ascii: "}")) { return true }
            if !first {
                guard consume(UInt8(ascii: ",")) else { return false }
                skipSpace()
            }
            first = false
            guard let key = string() else { return false }
            skipSpace()
            guard consume(UInt8(ascii: ":")) else { return false }
            skipSpace()
            guard each(key, &self) else { return false }
        }
    }
}

/// Whether `count` bytes at `a` and `b` are equal, word by word in line: event names (the
/// ranges `Envelope` finds) are compared per forwarded message, where a `bcmp` call through the
/// PLT cost more than the comparison.
@inline(__always)
func sameBytes(_ a: UnsafeRawPointer, _ b: UnsafeRawPointer, count: Int) -> Bool {
    var i = 0
    while i + 8 <= count {
        if a.loadUnaligned(fromByteOffset: i, as: UInt64.self) != b.loadUnaligned(fromByteOffset: i, as: UInt64.self) { return false }
        i += 8
    }
    while i < count {
        if a.load(fromByteOffset: i, as: UInt8.self) != b.load(fromByteOffset: i, as: UInt8.self) { return false }
        i += 1
    }
    return true
}
