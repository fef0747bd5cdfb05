/// Any JSON value through `Codable` (the audit spool's `details`, which are whatever an event
/// carries). An object decodes with its keys sorted: the decoders do not keep their order, and
/// the store's `jsonb` does not either.
extension JSONValue: Codable {
    private struct Key: CodingKey {
        let stringValue: String
        init(stringValue: String) { self.stringValue = stringValue }
        var intValue: Int? { nil }
        init?(intValue: Int) { nil }
    }

    public init(from decoder: any Decoder) throws {
        if let object = try? decoder.container(keyedBy: Key.self) {
            self = .object(try object.allKeys.sorted { $0.stringValue < $1.stringValue }.map {
                ($0.stringValue, try object.decode(JSONValue.self, forKey: $0))
            })
        } else if var array = try? decoder.unkeyedContainer() {
            var items: [JSONValue] = []
            while !array.isAtEnd { items.append(try array.decode(JSONValue.self)) }
            self = .array(items)
        } else {
            let value = try decoder.singleValueContainer()
            if value.decodeNil() {
                self = .null
            } else if let bool = try? value.decode(Bool.self) {
                self = .bool(bool)
            } else if let int = try? value.decode(Int64.self) {
                self = .int(int)
            } else if let double = try? value.decode(Double.self) {
                self = .double(double)
            } else {
                self = .string(try value.decode(String.self))
            }
        }
    }

    public func encode(to encoder: any Encoder) throws {
        func single(_ write: (inout any SingleValueEncodingContainer) throws -> Void) throws {
            var value = encoder.singleValueContainer()
            try write(&value)
        }
        switch self {
        case .object(let fields):
            var object = encoder.container(keyedBy: Key.self)
            for (key, value) in fields { try object.encode(value, forKey: Key(stringValue: key)) }
        case .array(let items):
            var array = encoder.unkeyedContainer()
            for item in items { try array.encode(item) }
        case .raw(let json):
            // Verbatim JSON the relay holds; should it not parse, its text is kept as a string.
            try ((try? JSONReader.parse(Array(json.utf8), maxDepth: 64)) ?? .string(json)).encode(to: encoder)
        case .bool(let bool): try single { try $0.encode(bool) }
        case .int(let int): try single { try $0.encode(int) }
        case .double(let double) where double.isFinite: try single { try $0.encode(double) }
        case .string(let string): try single { try $0.encode(string) }
        // NaN and the infinities as `encoded` writes them.
        case .null, .double: try single { try $0.encodeNil() }
        }
    }
}
