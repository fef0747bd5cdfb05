import Foundation
import WimzSealed

/// The robot's settings on a sealed device (docs/protocol.md v1.6 "The robot's settings",
/// "Sealed"): each document is a sealed frame of kind `settings` whose plaintext names the
/// version it was written for — `{"type":"settings","version":V,"doc":{…}}` from an app,
/// `{"type":"settings_applied","version":V,"doc":{…}}` from the robot — so a relay can neither
/// read one nor hand out an old one under a newer version.
extension RelayClient {
    /// The text a write of `doc` as version `version` sends: the document itself, or on a sealed
    /// device its settings frame sealed with the current epoch.
    func sealedSettings(_ doc: JSON, version: Int64) throws -> String {
        guard let epoch = seal?.current else { return doc.text }
        let inner = JSON.object(["type": "settings", "version": .integer(version), "doc": doc])
        return try seal!.sealer.sealSettings(Data(inner.text.utf8), in: epoch)
    }

    /// `settings` with its sealed documents opened (fetching an epoch this app does not hold
    /// yet); unchanged on a device that is not sealed.
    func opened(_ settings: RobotSettings) async -> RobotSettings {
        guard seal?.current != nil else { return settings }
        let documents = [settings.desired?.doc, settings.reported?.doc].compactMap { $0 }
        await fetchEpochs(Set(documents.compactMap { $0["type"]?.stringValue == "sealed" ? $0["epoch"]?.intValue : nil }))
        var settings = settings
        if var desired = settings.desired {
            (desired.doc, desired.sealedRejection) = open(desired.doc, as: "settings", version: desired.version)
            settings.desired = desired
        }
        if var reported = settings.reported {
            (reported.doc, reported.sealedRejection) = open(reported.doc, as: "settings_applied", version: reported.version)
            settings.reported = reported
        }
        return settings
    }

    /// The document inside a sealed settings frame, when it opens and its plaintext is a `type`
    /// frame for `version`; else `null` and why.
    private func open(_ sealed: JSON, as type: String, version: Int64) -> (JSON, FrameRejection?) {
        guard let opener = seal?.opener else { return (sealed, nil) }
        do {
            let inner = try JSON(parsing: String(decoding: try opener.openSettings(Data(sealed.text.utf8)).plaintext, as: UTF8.self))
            guard inner["type"]?.stringValue == type, case .object? = inner["doc"] else { throw FrameRejection.malformed }
            guard inner["version"]?.int64Value == version else { throw FrameRejection.wrongVersion }
            return (inner["doc"]!, nil)
        } catch {
            return (.null, error as? FrameRejection ?? .malformed)
        }
    }
}
