/// One entry of a device's timeline (docs/protocol.md "The household's timeline", v1.6):
/// `{"id":ID,"at":TIME,"source":"robot"|"relay","event":NAME,"message":MESSAGE}`, `message` the
/// frame's exact text, embedded as it was received.
public struct TimelineEntry: Sendable, Equatable {
    public enum Source: String, Sendable, Codable {
        case robot, relay
    }

    public var device: DeviceID
    /// The entry's place in its device's timeline: 1, 2, … in the order they were stored.
    public var number: Int64
    public var at: UnixTime
    public var source: Source
    public var event: String
    public var message: String

    public init(device: DeviceID, number: Int64, at: UnixTime, source: Source, event: String, message: String) {
        (self.device, self.number, self.at, self.source, self.event, self.message) = (device, number, at, source, event, message)
    }

    public var id: TimelineID { TimelineID(device: device, number: number) }

    /// The entry as the API answers it.
    public var json: JSONValue {
        .object([("id", .string(id.text)), ("at", .string(at.iso8601Milliseconds)), ("source", .string(source.rawValue)),
                 ("event", .string(event)), ("message", .raw(message))])
    }

    /// The relay's entries of household changes, which a guest never sees.
    public static let householdEvents = ["member_joined", "member_changed", "member_left", "roster"]

    public static func isHouseholdChange(_ event: String, source: Source) -> Bool {
        source == .relay && householdEvents.contains(event)
    }
}

/// An entry's ID: `TAG-NNNNNNNNNNNNNNNN`, the device's tag (11 characters of base64url, from a
/// hash of its id) and the entry's number in 16 hex digits — at most 64 characters of
/// `[A-Za-z0-9_-]`, ordered as byte strings like the numbers, the same on every node, never reused
/// (numbers only rise), and naming its device: another device's ID is refused even after its
/// entry is gone, while an erased or pruned one of this device is still a cursor.
public struct TimelineID: Sendable, Equatable {
    public var device: DeviceID
    public var number: Int64

    public init(device: DeviceID, number: Int64) {
        (self.device, self.number) = (device, number)
    }

    /// `TAG-NUMBER`: the device's tag (11 characters), then the number as 16 hex digits. Written
    /// in place: every notice to the apps carries one.
    public var text: String {
        String(unsafeUninitializedCapacity: 28) { out in
            Self.writeTag(of: device, into: out)
            out[11] = UInt8(ascii: "-")
            var n = UInt64(bitPattern: number)
            for k in (12..<28).reversed() {
                out[k] = Self.hexDigits.utf8Start[Int(n & 0xf)]
                n >>= 4
            }
            return 28
        }
    }

    private static let hexDigits: StaticString = "0123456789abcdef"
    private static let tagAlphabet: StaticString = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_"

    /// The ID `text` of one of `device`'s entries; nil when it is malformed or another device's.
    public init?(_ text: String, device: DeviceID) {
        let bytes = Array(text.utf8)
        guard bytes.count == 28, bytes[11] == UInt8(ascii: "-"), String(decoding: bytes[..<11], as: UTF8.self) == Self.tag(of: device),
              bytes[12...].allSatisfy({ (48...57).contains($0) || (97...102).contains($0) }),
              let number = UInt64(String(decoding: bytes[12...], as: UTF8.self), radix: 16), number <= UInt64(Int64.max) else { return nil }
        self.init(device: device, number: Int64(number))
    }

    /// FNV-1a of the device id, as 11 base64url characters: an ID's device, told apart without a
    /// lookup (not a secret: every caller is one of the device's members already).
    static func tag(of device: DeviceID) -> String {
        String(unsafeUninitializedCapacity: 11) { out in
            writeTag(of: device, into: out)
            return 11
        }
    }

    /// The tag's 11 characters at the start of `out`.
    private static func writeTag(of device: DeviceID, into out: UnsafeMutableBufferPointer<UInt8>) {
        var hash: UInt64 = 0xcbf2_9ce4_8422_2325
        for byte in device.rawValue.utf8 {
            hash ^= UInt64(byte)
            hash = hash &* 0x100_0000_01b3
        }
        for k in 0..<11 { out[k] = tagAlphabet.utf8Start[Int((hash >> UInt64(6 * k)) & 0x3f)] }
    }
}
