import Foundation
import WimzSealed

extension RelayClient {
    /// `entries` with the robot's sealed frames opened (docs/protocol.md v1.6 "Sealed"): the
    /// epochs they name that this app does not hold are fetched first (SealedHistory.swift), then
    /// each frame is opened as the live ones are — the robot's key of that epoch, the signature,
    /// the AEAD — by an opener of its own, since the timeline rereads what the socket may have
    /// shown. What does not open stays sealed and says why.
    func opened(_ entries: [TimelineEntry]) async -> [TimelineEntry] {
        guard seal?.current != nil else { return entries }
        let epochs = Set(entries.compactMap(\.sealedEpoch))
        guard !epochs.isEmpty else { return entries }
        await fetchEpochs(epochs)
        guard var opener = seal?.opener.forgettingOpened else { return entries }
        return entries.map { $0.opened(with: &opener) }
    }
}

extension TimelineEntry {
    /// The epoch of a robot's entry that is a sealed frame (nil for any other).
    var sealedEpoch: Int? {
        guard source == .robot, message["type"]?.stringValue == "sealed" else { return nil }
        return message["epoch"]?.intValue
    }

    /// This entry with its sealed frame opened by `opener`, or marked as left sealed.
    func opened(with opener: inout AppOpener) -> TimelineEntry {
        guard sealedEpoch != nil else { return self }
        var entry = self
        do {
            // The same (sid, n) twice in one reading: the relay stored a frame twice.
            guard case .opened(let frame) = try opener.open(Data(message.text.utf8)) else { throw FrameRejection.malformed }
            let inner = try JSON(parsing: String(decoding: frame.plaintext, as: UTF8.self))
            entry.message = inner
            entry.event = inner["event"]?.stringValue ?? event
            entry.sealing = .opened(epoch: frame.epoch, sealedAt: Date(timeIntervalSince1970: Double(frame.ts) / 1000))
        } catch {
            entry.sealing = .unopened(error as? FrameRejection ?? .malformed)
        }
        return entry
    }
}
