/// A robot's identity on the wire and in the store: `[A-Za-z0-9_.-]{1,64}` (docs/protocol.md).
public struct DeviceID: Hashable, Sendable, CustomStringConvertible {
    public static let maxLength = 64
    public let rawValue: String

    /// Nil unless `text` matches the contract's pattern exactly.
    public init?(_ text: String) {
        guard DeviceID.isValid(text.utf8) else { return nil }
        rawValue = text
    }

    /// Validates raw bytes without building a String first (the handshake path).
    public static func isValid<Bytes: Collection>(_ bytes: Bytes) -> Bool where Bytes.Element == UInt8 {
        guard !bytes.isEmpty, bytes.count <= maxLength else { return false }
        for c in bytes {
            switch c {
            case UInt8(ascii: "A")...UInt8(ascii: "Z"), UInt8(ascii: "a")...UInt8(ascii: "z"),
                 UInt8(ascii: "0")...UInt8(ascii: "9"), UInt8(ascii: "_"), UInt8(ascii: "."), UInt8(ascii: "-"):
                continue
            default:
                return false
            }
        }
        return true
    }

    public var description: String { rawValue }
}

/// Which end of a device a token or socket belongs to.
public enum Role: String, Sendable, CaseIterable, Codable {
    case robot
    case app

    /// Prefix of issued bearer tokens, so a leaked token is recognisable in scanners and logs.
    public var tokenPrefix: String {
        switch self {
        case .robot: return "wimz_r_"
        case .app: return "wimz_a_"
        }
    }
}
