import Foundation

/// Where an app keeps its sealed-household secrets: its identity, and each device's epochs (their
/// rosters and secrets), so that a restart, and its Notification Service Extension, open what it
/// could open before. `KeychainSealedKeyStore` on Apple platforms, `FileSealedKeyStore` elsewhere
/// (or in an app group's container, with complete file protection).
public protocol SealedKeyStore: Sendable {
    /// The app's identity, made and kept on first use.
    func identity() throws -> SealedIdentity
    /// The epochs kept for `deviceID`, oldest first.
    func epochs(of deviceID: String) throws -> [Epoch]
    /// Keeps `epoch` of `deviceID` (replacing one of the same number).
    func keep(_ epoch: Epoch, of deviceID: String) throws
}

/// What every store keeps, as one JSON document: the identity's private keys and, per device, its
/// epochs (the roster's exact bytes and the secret, base64url). `place` names the store in errors.
struct SealedKeyDocument: Codable {
    var sign: String
    var hpke: String
    var epochs: [String: [StoredEpoch]] = [:]

    struct StoredEpoch: Codable {
        var roster: String
        var secret: String
        /// A granted epoch's number (absent: the roster's).
        var epoch: Int?
    }

    /// A new identity's document.
    static func fresh() -> SealedKeyDocument {
        let keys = SealedIdentity().privateKeys
        return SealedKeyDocument(sign: Base64URL.encode(keys.signing), hpke: Base64URL.encode(keys.agreement))
    }

    static func decode(_ data: Data, place: String) throws -> SealedKeyDocument {
        do { return try JSONDecoder().decode(SealedKeyDocument.self, from: data) } catch {
            throw SealedError.malformed("\(place): not a key store")
        }
    }

    func encoded() throws -> Data { try JSONEncoder().encode(self) }

    func identity(place: String) throws -> SealedIdentity {
        guard let sign = Base64URL.decode(sign), let hpke = Base64URL.decode(hpke) else {
            throw SealedError.malformed("\(place): not a key store")
        }
        return try SealedIdentity(signingKey: sign, agreementKey: hpke)
    }

    func epochs(of deviceID: String, place: String) throws -> [Epoch] {
        try (epochs[deviceID] ?? []).map { item in
            guard let raw = Base64URL.decode(item.roster), let secret = Base64URL.decode(item.secret) else {
                throw SealedError.malformed("\(place): an epoch is not base64url")
            }
            return try Epoch(roster: try Roster.parse(raw), secret: secret, number: item.epoch)
        }.sorted { $0.number < $1.number }
    }

    mutating func keep(_ epoch: Epoch, of deviceID: String) {
        var kept = (epochs[deviceID] ?? []).filter { item in
            (item.epoch ?? (Base64URL.decode(item.roster).flatMap { try? Roster.parse($0) })?.epoch) != epoch.number
        }
        kept.append(StoredEpoch(roster: Base64URL.encode(epoch.roster.raw), secret: Base64URL.encode(epoch.secretBytes),
                                epoch: epoch.isGranted ? epoch.number : nil))
        epochs[deviceID] = kept
    }
}

/// What every store does with its document, given how it reads and writes it: the identity made
/// and kept on first use, the epochs read, an epoch kept (read, changed, written back).
struct SealedKeyDocumentAccess {
    let place: String
    let load: () throws -> SealedKeyDocument?
    let save: (SealedKeyDocument) throws -> Void

    func identity() throws -> SealedIdentity { try loadOrMake().identity(place: place) }

    func epochs(of deviceID: String) throws -> [Epoch] { try load()?.epochs(of: deviceID, place: place) ?? [] }

    func keep(_ epoch: Epoch, of deviceID: String) throws {
        var document = try loadOrMake()
        document.keep(epoch, of: deviceID)
        try save(document)
    }

    private func loadOrMake() throws -> SealedKeyDocument {
        if let document = try load() { return document }
        let document = SealedKeyDocument.fresh()
        try save(document)
        return document
    }
}

/// A `SealedKeyStore` in one JSON file, written 0600 (its directory made 0700) and replaced
/// atomically; a file others may read is refused, as the keys in it may have leaked.
public struct FileSealedKeyStore: SealedKeyStore {
    public let url: URL

    public init(url: URL) { self.url = url }

    public func identity() throws -> SealedIdentity { try document.identity() }
    public func epochs(of deviceID: String) throws -> [Epoch] { try document.epochs(of: deviceID) }
    public func keep(_ epoch: Epoch, of deviceID: String) throws { try document.keep(epoch, of: deviceID) }

    private var document: SealedKeyDocumentAccess { SealedKeyDocumentAccess(place: url.path, load: load, save: save) }

    private func load() throws -> SealedKeyDocument? {
        guard let attributes = try? FileManager.default.attributesOfItem(atPath: url.path) else { return nil }
        if let mode = attributes[.posixPermissions] as? NSNumber, mode.intValue & 0o077 != 0 {
            throw SealedError.malformed("\(url.path) is readable by others: make a new identity")
        }
        return try SealedKeyDocument.decode(Data(contentsOf: url), place: url.path)
    }

    private func save(_ document: SealedKeyDocument) throws {
        let directory = url.deletingLastPathComponent()
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true, attributes: [.posixPermissions: 0o700])
        let temporary = directory.appendingPathComponent(".\(url.lastPathComponent).new")
        guard FileManager.default.createFile(atPath: temporary.path, contents: try document.encoded(), attributes: [.posixPermissions: 0o600])
        else { throw SealedError.malformed("\(temporary.path): cannot be written") }
        // rename(2): atomic, over an existing file or none (FileManager's replace needs one there).
        guard rename(temporary.path, url.path) == 0 else { throw SealedError.malformed("\(url.path): cannot be written") }
    }
}
