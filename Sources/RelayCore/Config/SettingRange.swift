/// The values a numeric serve setting may take: a lower bound (included or not) and an optional
/// upper one. Checked by `RelayConfiguration.validate()` and printed in the help and the docs.
public struct SettingRange: Sendable, Equatable {
    public let low: Double
    public let lowIncluded: Bool
    public let high: Double?

    /// `low` or more.
    public static func atLeast(_ low: Double) -> SettingRange { SettingRange(low: low, lowIncluded: true, high: nil) }
    /// `low` to `high`, both included.
    public static func from(_ low: Double, to high: Double) -> SettingRange {
        SettingRange(low: low, lowIncluded: true, high: high)
    }
    /// More than zero.
    public static let positive = SettingRange(low: 0, lowIncluded: false, high: nil)
    /// More than zero, `high` at most.
    public static func positive(upTo high: Double) -> SettingRange { SettingRange(low: 0, lowIncluded: false, high: high) }

    public func contains(_ value: Double) -> Bool {
        (lowIncluded ? value >= low : value > low) && (high.map { value <= $0 } ?? true)
    }

    /// `ClosedRange` of whole numbers, for callers outside the configuration (an API's own check).
    public var integers: ClosedRange<Int> {
        Int((lowIncluded ? low : low + 1).rounded(.up))...Int(high ?? Double(Int32.max))
    }

    /// "1–65536", "at least 1", "positive", "positive, at most 300".
    public var text: String {
        switch (lowIncluded, high) {
        case (true, let high?): return "\(SettingRange.number(low))–\(SettingRange.number(high))"
        case (true, nil): return "at least \(SettingRange.number(low))"
        case (false, let high?): return "positive, at most \(SettingRange.number(high))"
        case (false, nil): return "positive"
        }
    }

    /// A whole number without its `.0`.
    static func number(_ value: Double) -> String {
        value == value.rounded() && abs(value) < 1e15 ? String(Int64(value)) : String(value)
    }
}

/// A setting that cannot be used: the message names the variable and says what it takes.
public struct ConfigurationError: Error, CustomStringConvertible, Sendable {
    public let description: String
    public init(_ description: String) { self.description = description }
}
