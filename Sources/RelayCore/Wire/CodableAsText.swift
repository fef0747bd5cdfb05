/// A value that goes through `Codable` as its text (`description`), checked as it is read by
/// the type's own parser, `init?(_:)`.
public protocol CodableAsText: Codable, CustomStringConvertible {
    init?(_ text: String)
}

extension CodableAsText {
    public init(from decoder: any Decoder) throws {
        let value = try decoder.singleValueContainer()
        guard let parsed = Self(try value.decode(String.self)) else {
            throw DecodingError.dataCorruptedError(in: value, debugDescription: "not a \(Self.self)")
        }
        self = parsed
    }

    public func encode(to encoder: any Encoder) throws {
        var value = encoder.singleValueContainer()
        try value.encode(description)
    }
}

extension DeviceID: CodableAsText {}
extension UUIDValue: CodableAsText {}
