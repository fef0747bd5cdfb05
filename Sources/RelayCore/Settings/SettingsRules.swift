/// The rules of the robot's settings documents (docs/protocol.md "The robot's settings", v1.6),
/// pure: what the HTTP endpoint and the robot's `settings_applied` are checked against.
public enum SettingsRules {
    /// A document's largest size, in bytes of its JSON text.
    public static let maxDocumentBytes = 16 * 1024
    /// How deep a document may nest (the robot's own parser must read it).
    static let maxDepth = 64

    /// What an `If-Match` header names.
    public enum Precondition: Equatable, Sendable {
        /// No header: 428 `precondition_required`.
        case missing
        /// Not a quoted decimal: 400 `bad_request`.
        case malformed
        /// The desired version the writer read (0: none).
        case version(Int64)
    }

    /// `If-Match: "V"`: a quoted whole number (`"0"` for no document yet), nothing else (no list,
    /// no `*`, no weak tag: a write names the one version it read).
    public static func precondition(_ header: String?) -> Precondition {
        guard let header else { return .missing }
        let text = Array(header.utf8)
        guard text.count >= 3, text.first == UInt8(ascii: "\""), text.last == UInt8(ascii: "\""),
              let version = text[1..<(text.count - 1)].withUnsafeBufferPointer({ version($0) }) else { return .malformed }
        return .version(version)
    }

    /// A version as sent: a whole number from 0, digits only, no leading zero, at most 18 digits.
    public static func version(_ digits: UnsafeBufferPointer<UInt8>) -> Int64? {
        guard (1...18).contains(digits.count), digits.allSatisfy({ (48...57).contains($0) }),
              digits.count == 1 || digits[0] != UInt8(ascii: "0") else { return nil }
        return digits.reduce(0) { $0 * 10 + Int64($1 - 48) }
    }

    /// `document` as a settings document, or why it can't be one: larger than
    /// `maxDocumentBytes` (`too_large`), not one JSON object (`invalid_settings`), or a plain
    /// one for a sealed device (`sealed_device`). Pass `sealedDevice: nil` where the device's
    /// seal is checked later (under its row lock). Returns whether it is a sealed frame of kind
    /// `settings` (v1.5's envelope, v1.6's kind), read from the one parse.
    @discardableResult
    public static func checked(document: [UInt8], sealedDevice: Bool?) throws(RelayError) -> Document {
        guard document.count <= maxDocumentBytes else {
            throw RelayError(.tooLarge, "a settings document is at most \(maxDocumentBytes) bytes")
        }
        guard let value = try? JSONReader.parse(document, maxDepth: maxDepth), case .object = value else {
            throw RelayError(.invalidSettings, "a settings document is one JSON object")
        }
        let sealedFrame = value.member("type")?.stringValue == "sealed" && value.member("kind")?.stringValue == "settings"
        if sealedDevice == true, !sealedFrame {
            throw RelayError(.sealedDevice, "this device is sealed: its settings are a sealed frame of kind settings")
        }
        return Document(text: String(decoding: document, as: UTF8.self), isSealedFrame: sealedFrame)
    }

    /// A document that passed ``checked(document:sealedDevice:)``: its exact text, and whether it
    /// is a sealed frame.
    public struct Document: Sendable, Equatable {
        public let text: String
        public let isSealedFrame: Bool
    }
}

/// The two versions alone: what a node keeps for the devices it serves, and what the store's
/// notification of a change carries.
public struct SettingsVersions: Sendable, Equatable {
    /// The desired document's version; 0: none was written.
    public var desired: Int64
    /// The desired version the robot last applied; nil: it has reported nothing.
    public var reported: Int64?

    public init(desired: Int64, reported: Int64?) {
        (self.desired, self.reported) = (desired, reported)
    }

    /// Whether the robot has yet to apply the desired document.
    public var robotIsBehind: Bool { desired > (reported ?? 0) }
}
