import WimzProtocol
/// Reads a `mission_progress` frame's state in one pass over its bytes, building no tree: the
/// hub does it for every such frame of a device with Live Activities, on the forwarding path,
/// where `JSONReader` (a tree of strings) cost ~30,000 instructions a 250-byte frame. It reads
/// what `MissionState(data:)` reads from a well-formed frame — the first `data` member, in it the
/// first of each state member — and hands anything it does not read plainly (an escape in a key
/// or a state string, a frame it cannot follow) back to `JSONReader`. It checks only what it needs
/// to find each value's end: the frame is forwarded as it came either way.
enum MissionStateScanner {
    /// The frame's state; `nil` when the frame is not an object with an object `data`.
    static func state(_ bytes: UnsafeBufferPointer<UInt8>) -> MissionState? {
        var cursor = Cursor(bytes: bytes)
        switch cursor.topLevelData() {
        case .found(let state): return state
        case .absent: return nil
        case .unsure: return (try? JSONReader.parse(Array(bytes))).flatMap { MissionState(data: $0.member("data")) }
        }
    }

    enum Outcome {
        case found(MissionState)
        /// Not an object, or no object `data`.
        case absent
        /// Something this scanner leaves to `JSONReader`.
        case unsure
    }

    struct Unsure: Error {}

    struct Cursor {
        let bytes: UnsafeBufferPointer<UInt8>
        var i = 0

        static let quote = UInt8(ascii: "\""), backslash = UInt8(ascii: "\\")
        static let data = Array("data".utf8)

        mutating func topLevelData() -> Outcome {
            do {
                skipSpace()
                guard try take(UInt8(ascii: "{")) else { return .absent }
                var state: MissionState?
                var first = true
                while let key = try nextMember(&first) {
                    if state == nil, key.elementsEqual(Self.data), try peek() == UInt8(ascii: "{") {
                        state = try dataObject()
                    } else {
                        try skipValue()
                    }
                }
                skipSpace()
                guard i == bytes.count else { return .unsure }
                return state.map(Outcome.found) ?? .absent
            } catch {
                return .unsure
            }
        }

        /// The `data` object's state members, each the first of its name, typed by `MissionProgress.set`.
        mutating func dataObject() throws -> MissionState {
            i += 1
            var progress = MissionProgress()
            var seen: UInt8 = 0
            var first = true
            while let key = try nextMember(&first) {
                guard let field = Self.fields.firstIndex(where: { key.elementsEqual($0) }), seen & (1 << field) == 0 else {
                    try skipValue()
                    continue
                }
                seen |= 1 << field
                progress.set(MissionProgress.Member.allCases[field], try scalar())
            }
            return MissionState(progress)
        }

        static let fields = MissionProgress.Member.allCases.map { Array($0.rawValue.utf8) }

        /// The next member's key of the object the cursor is in (its bytes: a key with an escape
        /// is left to `JSONReader`), the cursor then on its value, which the caller consumes; nil
        /// past the object's end. `first`: no member was read yet.
        mutating func nextMember(_ first: inout Bool) throws -> UnsafeBufferPointer<UInt8>? {
            skipSpace()
            if first {
                first = false
                if try take(UInt8(ascii: "}")) { return nil }
            } else if try !take(UInt8(ascii: ",")) {
                guard try take(UInt8(ascii: "}")) else { throw Unsure() }
                return nil
            }
            skipSpace()
            let key = try plainString()
            skipSpace()
            guard try take(UInt8(ascii: ":")) else { throw Unsure() }
            skipSpace()
            return key
        }

        // MARK: - Values

        /// The value under the cursor as a `MissionProgress.Scalar` (anything but a string or a number
        /// is skipped as `.other`).
        mutating func scalar() throws -> MissionProgress.Scalar {
            let first = try peek()
            if first == Self.quote { return .text(String(decoding: try plainString(), as: UTF8.self)) }
            guard first == UInt8(ascii: "-") || (0x30...0x39).contains(first) else {
                try skipValue()
                return .other
            }
            let start = i
            while i < bytes.count, Self.isNumberByte(bytes[i]) { i += 1 }
            let text = String(decoding: UnsafeBufferPointer(rebasing: bytes[start..<i]), as: UTF8.self)
            if let integer = Int64(text) { return .integer(integer) }
            guard let number = Double(text) else { throw Unsure() }
            return .number(number)
        }

        /// A string without escapes: its bytes. One with an escape is left to `JSONReader`.
        mutating func plainString() throws -> UnsafeBufferPointer<UInt8> {
            guard try take(Self.quote) else { throw Unsure() }
            let start = i
            while i < bytes.count {
                switch bytes[i] {
                case Self.quote:
                    i += 1
                    return UnsafeBufferPointer(rebasing: bytes[start..<(i - 1)])
                case Self.backslash, 0x00..<0x20: throw Unsure()
                default: i += 1
                }
            }
            throw Unsure()
        }

        /// Moves past one value of any kind (escapes in strings included), checking only what
        /// it must to find its end.
        mutating func skipValue() throws {
            var depth = 0
            repeat {
                skipSpace()
                guard i < bytes.count else { throw Unsure() }
                switch bytes[i] {
                case Self.quote:
                    i += 1
                    while true {
                        guard i < bytes.count else { throw Unsure() }
                        let byte = bytes[i]
                        i += byte == Self.backslash ? 2 : 1
                        if byte == Self.quote { break }
                    }
                case UInt8(ascii: "{"), UInt8(ascii: "["):
                    depth += 1
                    i += 1
                case UInt8(ascii: "}"), UInt8(ascii: "]"):
                    guard depth > 0 else { throw Unsure() }
                    depth -= 1
                    i += 1
                case UInt8(ascii: ","), UInt8(ascii: ":"):
                    guard depth > 0 else { throw Unsure() }
                    i += 1
                default:
                    let start = i
                    while i < bytes.count, Self.isNumberByte(bytes[i]) || (0x61...0x7A).contains(bytes[i]) { i += 1 }
                    guard i > start else { throw Unsure() }
                }
            } while depth > 0
        }

        static func isNumberByte(_ byte: UInt8) -> Bool {
            (0x30...0x39).contains(byte) || byte == UInt8(ascii: "-") || byte == UInt8(ascii: "+") || byte == UInt8(ascii: ".")
                || byte == UInt8(ascii: "e") || byte == UInt8(ascii: "E")
        }

        mutating func skipSpace() {
            while i < bytes.count, bytes[i] == 0x20 || bytes[i] == 0x09 || bytes[i] == 0x0A || bytes[i] == 0x0D { i += 1 }
        }

        func peek() throws -> UInt8 {
            guard i < bytes.count else { throw Unsure() }
            return bytes[i]
        }

        mutating func take(_ byte: UInt8) throws -> Bool {
            guard try peek() == byte else { return false }
            i += 1
            return true
        }
    }
}
