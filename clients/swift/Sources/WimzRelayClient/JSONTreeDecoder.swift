import Foundation

extension JSON {
    /// Decodes `type` from this value as it is, without going back to text: a message is parsed
    /// once, and its `data` typed from the tree. Keys convert as `JSONDecoder`'s
    /// `.convertFromSnakeCase` does when `snakeCaseKeys` is set; numbers decode as any numeric
    /// type that holds them exactly.
    public func decode<T: Decodable>(_ type: T.Type, snakeCaseKeys: Bool = false) throws -> T {
        try T(from: TreeDecoder(value: self, codingPath: [], snakeCaseKeys: snakeCaseKeys))
    }
}

/// A `Decoder` over one `JSON` value.
private struct TreeDecoder: Decoder {
    let value: JSON
    let codingPath: [any CodingKey]
    let snakeCaseKeys: Bool
    var userInfo: [CodingUserInfoKey: Any] { [:] }

    func container<Key: CodingKey>(keyedBy type: Key.Type) throws -> KeyedDecodingContainer<Key> {
        guard case .object(let members) = value else { throw mismatch([String: JSON].self, value, codingPath) }
        let keyed = snakeCaseKeys ? Dictionary(members.map { (convertFromSnakeCase($0.key), $0.value) }) { first, _ in first } : members
        return KeyedDecodingContainer(Keyed<Key>(members: keyed, codingPath: codingPath, snakeCaseKeys: snakeCaseKeys))
    }

    func unkeyedContainer() throws -> any UnkeyedDecodingContainer {
        guard case .array(let elements) = value else { throw mismatch([JSON].self, value, codingPath) }
        return Unkeyed(elements: elements, codingPath: codingPath, snakeCaseKeys: snakeCaseKeys)
    }

    func singleValueContainer() throws -> any SingleValueDecodingContainer { self }
}

extension TreeDecoder: SingleValueDecodingContainer {
    func decodeNil() -> Bool { value == .null }

    /// Being generic, it also stands for each primitive `decode` requirement (as `Keyed`'s
    /// generic `decode(_:forKey:)` does for its own).
    func decode<T: Decodable>(_ type: T.Type) throws -> T {
        switch type {
        case is Bool.Type:
            guard case .bool(let b) = value else { throw mismatch(type, value, codingPath) }
            return b as! T
        case is String.Type:
            guard case .string(let s) = value else { throw mismatch(type, value, codingPath) }
            return s as! T
        case is Double.Type:
            guard let n = value.doubleValue else { throw mismatch(type, value, codingPath) }
            return n as! T
        case is Float.Type:
            guard let n = value.doubleValue else { throw mismatch(type, value, codingPath) }
            return Float(n) as! T
        case let integer as any FixedWidthInteger.Type:
            let exact: (any FixedWidthInteger)? = switch value {
            case .integer(let n): integer.init(exactly: n)
            case .number(let n): integer.init(exactly: n)
            default: nil
            }
            guard let exact else { throw mismatch(type, value, codingPath) }
            return exact as! T
        case is JSON.Type:
            return value as! T
        default:
            return try T(from: self)
        }
    }
}

private struct Keyed<Key: CodingKey>: KeyedDecodingContainerProtocol {
    let members: [String: JSON]
    let codingPath: [any CodingKey]
    let snakeCaseKeys: Bool
    var allKeys: [Key] { members.keys.compactMap(Key.init(stringValue:)) }

    func contains(_ key: Key) -> Bool { members[key.stringValue] != nil }

    private func member(_ key: Key) throws -> TreeDecoder {
        guard let value = members[key.stringValue] else {
            throw DecodingError.keyNotFound(key, .init(codingPath: codingPath, debugDescription: "no member \(key.stringValue)"))
        }
        return TreeDecoder(value: value, codingPath: codingPath + [key], snakeCaseKeys: snakeCaseKeys)
    }

    func decodeNil(forKey key: Key) throws -> Bool { try member(key).decodeNil() }
    func decode<T: Decodable>(_ type: T.Type, forKey key: Key) throws -> T { try member(key).decode(type) }

    func nestedContainer<NestedKey: CodingKey>(keyedBy type: NestedKey.Type, forKey key: Key) throws
        -> KeyedDecodingContainer<NestedKey> { try member(key).container(keyedBy: type) }
    func nestedUnkeyedContainer(forKey key: Key) throws -> any UnkeyedDecodingContainer { try member(key).unkeyedContainer() }
    func superDecoder() throws -> any Decoder { TreeDecoder(value: .object(members), codingPath: codingPath, snakeCaseKeys: snakeCaseKeys) }
    func superDecoder(forKey key: Key) throws -> any Decoder { try member(key) }
}

private struct Unkeyed: UnkeyedDecodingContainer {
    let elements: [JSON]
    let codingPath: [any CodingKey]
    let snakeCaseKeys: Bool
    var currentIndex = 0
    var count: Int? { elements.count }
    var isAtEnd: Bool { currentIndex >= elements.count }

    init(elements: [JSON], codingPath: [any CodingKey], snakeCaseKeys: Bool) {
        self.elements = elements
        self.codingPath = codingPath
        self.snakeCaseKeys = snakeCaseKeys
    }

    private struct Index: CodingKey {
        var intValue: Int?
        var stringValue: String { "\(intValue ?? 0)" }
        init(intValue: Int) { self.intValue = intValue }
        init?(stringValue: String) { nil }
    }

    private mutating func next() throws -> TreeDecoder {
        guard !isAtEnd else {
            throw DecodingError.valueNotFound(JSON.self, .init(codingPath: codingPath, debugDescription: "the array has no more elements"))
        }
        defer { currentIndex += 1 }
        return TreeDecoder(value: elements[currentIndex], codingPath: codingPath + [Index(intValue: currentIndex)], snakeCaseKeys: snakeCaseKeys)
    }

    mutating func decodeNil() throws -> Bool {
        guard !isAtEnd, elements[currentIndex] == .null else { return false }
        currentIndex += 1
        return true
    }

    mutating func decode<T: Decodable>(_ type: T.Type) throws -> T { try next().decode(type) }
    mutating func nestedContainer<NestedKey: CodingKey>(keyedBy type: NestedKey.Type) throws -> KeyedDecodingContainer<NestedKey> {
        try next().container(keyedBy: type)
    }
    mutating func nestedUnkeyedContainer() throws -> any UnkeyedDecodingContainer { try next().unkeyedContainer() }
    mutating func superDecoder() throws -> any Decoder { try next() }
}

private func mismatch(_ type: Any.Type, _ value: JSON, _ path: [any CodingKey]) -> DecodingError {
    .typeMismatch(type, .init(codingPath: path, debugDescription: "expected \(type), found \(value.text)"))
}

/// `JSONDecoder.KeyDecodingStrategy.convertFromSnakeCase`'s rule: `dog_id` → `dogId`, leading and
/// trailing underscores kept, a key without an inner underscore unchanged.
func convertFromSnakeCase(_ key: String) -> String {
    guard let first = key.firstIndex(where: { $0 != "_" }) else { return key }
    let last = key.lastIndex(where: { $0 != "_" })!
    let components = key[first...last].split(separator: "_")
    guard components.count > 1 else { return key }
    let joined = components[0].lowercased() + components.dropFirst().map { $0.capitalized }.joined()
    return String(key[..<first]) + joined + String(key[key.index(after: last)...])
}
