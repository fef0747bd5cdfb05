import Foundation
import RelayCore

/// One line of the audit spool (`audit-spool.jsonl`, and `audit-rejected.jsonl` alike): an audit
/// event as its fields, or a TURN issuance as `{"issuance":{…}}`. Written and read through this
/// one `Codable` declaration and the records' own coding keys, in the format 1.1 wrote: its spool
/// files replay after an upgrade, and ours after a roll back to it.
enum SpoolLine: Equatable, Codable {
    case event(AuditEvent)
    case issuance(TurnIssuance)

    private enum Key: String, CodingKey { case issuance }

    init(from decoder: any Decoder) throws {
        let wrapper = try decoder.container(keyedBy: Key.self)
        if wrapper.contains(.issuance) {
            self = .issuance(try wrapper.decode(TurnIssuance.self, forKey: .issuance))
        } else {
            self = .event(try AuditEvent(from: decoder))
        }
    }

    func encode(to encoder: any Encoder) throws {
        switch self {
        case .event(let event):
            try event.encode(to: encoder)
        case .issuance(let issuance):
            var wrapper = encoder.container(keyedBy: Key.self)
            try wrapper.encode(issuance, forKey: .issuance)
        }
    }

    /// A line read back; nil for one that is no event or issuance (a damaged file: a cut line,
    /// an id that is not a UUID). A spool's lines share one `decoder`.
    init?(line: some StringProtocol, decoder: JSONDecoder = JSONDecoder()) {
        guard let read = try? decoder.decode(SpoolLine.self, from: Data(line.utf8)) else { return nil }
        self = read
    }

    /// The line, without its newline. A spool's lines share one `encoder`.
    func line(encoder: JSONEncoder = SpoolLine.encoder()) throws -> String {
        String(decoding: try encoder.encode(self), as: UTF8.self)
    }

    /// The encoder of spool lines: `/` as it is (the relay's own JSON writes it so too).
    static func encoder() -> JSONEncoder {
        let encoder = JSONEncoder()
        encoder.outputFormatting = .withoutEscapingSlashes
        return encoder
    }

    /// The lines of `issuances` then `events`, each ended by a newline; one that cannot be
    /// written is handed to `unwritable`.
    static func text(_ events: [AuditEvent], _ issuances: [TurnIssuance], unwritable: (SpoolLine, Error) -> Void) -> String {
        let encoder = encoder()
        var text = ""
        for record in issuances.map(SpoolLine.issuance) + events.map(SpoolLine.event) {
            do { text += try record.line(encoder: encoder) + "\n" } catch { unwritable(record, error) }
        }
        return text
    }
}
