/// A release's `MAJOR.MINOR.PATCH`, ordered as releases are. A development build's package
/// version (`1.2.0~dev.7+g…`) is not one: such a build is the release it leads to.
public struct ReleaseVersion: Comparable, Sendable, CustomStringConvertible {
    public let major: Int
    public let minor: Int
    public let patch: Int

    /// Parses exactly `MAJOR.MINOR.PATCH` (digits only); nil for anything else.
    public init?(_ text: some StringProtocol) {
        let parts = text.split(separator: ".", omittingEmptySubsequences: false)
        guard parts.count == 3,
              parts.allSatisfy({ !$0.isEmpty && $0.count <= 9 && $0.allSatisfy({ $0.isASCII && $0.isNumber }) }),
              let major = Int(parts[0]), let minor = Int(parts[1]), let patch = Int(parts[2])
        else { return nil }
        (self.major, self.minor, self.patch) = (major, minor, patch)
    }

    public static func < (a: ReleaseVersion, b: ReleaseVersion) -> Bool {
        (a.major, a.minor, a.patch) < (b.major, b.minor, b.patch)
    }

    public var description: String { "\(major).\(minor).\(patch)" }

    /// The release this binary is.
    public static let current = ReleaseVersion(RelayVersion.current)!
}
