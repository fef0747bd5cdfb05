import Foundation

/// Where an app keeps its sealed-household secrets: its identity, and each device's epochs (their
/// rosters and secrets), so that a restart, and its Notification Service Extension, open what it
/// could open before. `FileSealedKeyStore` is the one built; on Apple platforms put its file in
/// the app group's container with complete file protection (the Keychain is not built yet).
public protocol SealedKeyStore: Sendable {
    /// The app's identity, made and kept on first use.
    func identity() throws -> SealedIdentity
    /// The epochs kept for `deviceID`, oldest first.
    func epochs(of deviceID: String) throws -> [Epoch]
    /// Keeps `epoch` of `deviceID` (replacing one of the same number).
    func keep(_ epoch: Epoch, of deviceID: String) throws
}

/// A `SealedKeyStore` in one JSON file, written 0600 (its directory made 0700) and replaced
/// atomically; a file others may read is refused, as the keys in it may have leaked.
public struct FileSealedKeyStore: SealedKeyStore {
    public let url: URL

    public init(url: URL) { self.url = url }

    private struct Stored: Codable {
        var sign: String
        var hpke: String
        /// Device id → its epochs: the roster's exact bytes and the secret, base64url.
        var epochs: [String: [StoredEpoch]] = [:]
    }

    private struct StoredEpoch: Codable {
        var roster: String
        var secret: String
    }

    public func identity() throws -> SealedIdentity {
        let stored = try load() ?? make()
        guard let sign = Base64URL.decode(stored.sign), let hpke = Base64URL.decode(stored.hpke) else {
            throw SealedError.malformed("\(url.path): not a key store")
        }
        return try SealedIdentity(signingKey: sign, agreementKey: hpke)
    }

    public func epochs(of deviceID: String) throws -> [Epoch] {
        try (load()?.epochs[deviceID] ?? []).map { item in
            guard let raw = Base64URL.decode(item.roster), let secret = Base64URL.decode(item.secret) else {
                throw SealedError.malformed("\(url.path): an epoch is not base64url")
            }
            return try Epoch(roster: try Roster.parse(raw), secret: secret)
        }.sorted { $0.number < $1.number }
    }

    public func keep(_ epoch: Epoch, of deviceID: String) throws {
        var stored = try load() ?? make()
        var kept = (stored.epochs[deviceID] ?? []).filter { item in
            (Base64URL.decode(item.roster).flatMap { try? Roster.parse($0) })?.epoch != epoch.number
        }
        kept.append(StoredEpoch(roster: Base64URL.encode(epoch.roster.raw), secret: Base64URL.encode(epoch.secretBytes)))
        stored.epochs[deviceID] = kept
        try save(stored)
    }

    private func make() throws -> Stored {
        let keys = SealedIdentity().privateKeys
        let stored = Stored(sign: Base64URL.encode(keys.signing), hpke: Base64URL.encode(keys.agreement))
        try save(stored)
        return stored
    }

    private func load() throws -> Stored? {
        guard let attributes = try? FileManager.default.attributesOfItem(atPath: url.path) else { return nil }
        if let mode = attributes[.posixPermissions] as? NSNumber, mode.intValue & 0o077 != 0 {
            throw SealedError.malformed("\(url.path) is readable by others: make a new identity")
        }
        return try JSONDecoder().decode(Stored.self, from: Data(contentsOf: url))
    }

    private func save(_ stored: Stored) throws {
        let directory = url.deletingLastPathComponent()
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true, attributes: [.posixPermissions: 0o700])
        let temporary = directory.appendingPathComponent(".\(url.lastPathComponent).new")
        guard FileManager.default.createFile(atPath: temporary.path, contents: try JSONEncoder().encode(stored),
                                             attributes: [.posixPermissions: 0o600])
        else { throw SealedError.malformed("\(temporary.path): cannot be written") }
        // rename(2): atomic, over an existing file or none (FileManager's replace needs one there).
        guard rename(temporary.path, url.path) == 0 else { throw SealedError.malformed("\(url.path): cannot be written") }
    }
}
