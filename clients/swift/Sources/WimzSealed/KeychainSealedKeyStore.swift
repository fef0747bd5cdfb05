#if canImport(Security)
import Foundation
import Security

/// A `SealedKeyStore` in the Keychain (Apple platforms): the document the file store keeps, as
/// one generic-password item. Readable after the phone's first unlock, so that the Notification
/// Service Extension opens a push on a locked phone, and on this device only: never in a backup
/// or the iCloud Keychain, where a key would outlive the install it belongs to. The app and its
/// extension share it through a Keychain access group (`accessGroup`, with the team prefix).
///
/// Written for iOS 17 / macOS 14 and not built by this repository's Linux CI.
public struct KeychainSealedKeyStore: SealedKeyStore {
    public let service: String
    public let accessGroup: String?

    public init(service: String = "com.wimzai.sealed-household", accessGroup: String? = nil) {
        self.service = service
        self.accessGroup = accessGroup
    }

    public func identity() throws -> SealedIdentity { try document.identity() }
    public func epochs(of deviceID: String) throws -> [Epoch] { try document.epochs(of: deviceID) }
    public func keep(_ epoch: Epoch, of deviceID: String) throws { try document.keep(epoch, of: deviceID) }

    private var document: SealedKeyDocumentAccess { SealedKeyDocumentAccess(place: place, load: load, save: save) }
    private var place: String { "the Keychain item \(service)" }

    /// The one item: class, service, account and (when shared) access group.
    private var item: [String: Any] {
        var item: [String: Any] = [kSecClass as String: kSecClassGenericPassword, kSecAttrService as String: service,
                                   kSecAttrAccount as String: "keys", kSecUseDataProtectionKeychain as String: true]
        if let accessGroup { item[kSecAttrAccessGroup as String] = accessGroup }
        return item
    }

    private func load() throws -> SealedKeyDocument? {
        var query = item
        query[kSecReturnData as String] = true
        query[kSecMatchLimit as String] = kSecMatchLimitOne
        var result: CFTypeRef?
        let status = SecItemCopyMatching(query as CFDictionary, &result)
        if status == errSecItemNotFound { return nil }
        guard status == errSecSuccess, let data = result as? Data else {
            throw SealedError.malformed("\(place): cannot be read (OSStatus \(status))")
        }
        return try SealedKeyDocument.decode(data, place: place)
    }

    private func save(_ document: SealedKeyDocument) throws {
        let data = try document.encoded()
        let updated = SecItemUpdate(item as CFDictionary, [kSecValueData as String: data] as CFDictionary)
        if updated == errSecSuccess { return }
        guard updated == errSecItemNotFound else { throw SealedError.malformed("\(place): cannot be written (OSStatus \(updated))") }
        var added = item
        added[kSecValueData as String] = data
        added[kSecAttrAccessible as String] = kSecAttrAccessibleAfterFirstUnlockThisDeviceOnly
        let status = SecItemAdd(added as CFDictionary, nil)
        guard status == errSecSuccess else { throw SealedError.malformed("\(place): cannot be written (OSStatus \(status))") }
    }
}
#endif
