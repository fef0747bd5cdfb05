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

    /// Why `document` can't be a settings document (nil: it can): larger than
    /// `maxDocumentBytes` (`too_large`), not one JSON object (`invalid_settings`), or a plain
    /// one for a sealed device (`sealed_device`). Pass `sealedDevice: nil` where the device's
    /// seal is checked later (under its row lock).
    public static func check(document: [UInt8], sealedDevice: Bool?) -> RelayError? {
        guard document.count <= maxDocumentBytes else {
            return RelayError(.tooLarge, "a settings document is at most \(maxDocumentBytes) bytes")
        }
        guard let value = try? JSONReader.parse(document, maxDepth: maxDepth), case .object = value else {
            return RelayError(.invalidSettings, "a settings document is one JSON object")
        }
        if sealedDevice == true, !isSealedFrame(value) {
            return RelayError(.sealedDevice, "this device is sealed: its settings are a sealed frame of kind settings")
        }
        return nil
    }

    /// Whether a document is a sealed frame of kind `settings` (v1.5's envelope, v1.6's kind).
    public static func isSealedFrame(_ document: JSONValue) -> Bool {
        document.member("type")?.stringValue == "sealed" && document.member("kind")?.stringValue == "settings"
    }

    /// `isSealedFrame` of a document's text (a valid one: `check` passed).
    public static func isSealedFrame(_ document: [UInt8]) -> Bool {
        (try? JSONReader.parse(document, maxDepth: maxDepth)).map(isSealedFrame) ?? false
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
