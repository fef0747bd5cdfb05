import RelayCore

/// Every notification the store sends, and its payload grammar, in one place. The credential
/// ones come from the triggers of migrations/0001_initial.sql; the cluster ones from
/// `ClusterRepository`.
///
/// | channel            | payload                          |
/// |--------------------|----------------------------------|
/// | `wimz_credentials` | `token:<id>`                     |
/// | `wimz_credentials` | `device:<device id>`             |
/// | `wimz_credentials` | `turn_secret:<realm>`            |
/// | `wimz_credentials` | `push:<device id>`               |
/// | `wimz_credentials` | `live:<device id>`               |
/// | `wimz_credentials` | `run:<device id>`                |
/// | `wimz_credentials` | `sealed:<device id> <epoch>`     |
/// | `wimz_credentials` | `roster:<device id> <id>`        |
/// | `wimz_credentials` | `settings:<device id> <desired> <reported or ->` |
/// | `wimz_credentials` | `timeline:<device id> <newest> <newest for guests or ->` |
/// | `wimz_cluster`     | `claim <node> <device> <device>…`|
/// | `wimz_cluster`     | `handoff <to-node>`              |
public enum StoreNotification: Equatable, Sendable {
    /// A token was issued, changed or deleted.
    case token(id: Int64)
    /// A device was added, disabled or enabled.
    case device(DeviceID)
    /// A TURN secret of `realm` was added, retired or removed.
    case turnSecret(realm: String)
    /// A push registration of the device was added, changed or removed (migrations/0007).
    case push(DeviceID)
    /// A Live Activity token of the device was handed over, replaced or removed (migrations/0013).
    case liveActivity(DeviceID)
    /// The device's mission run ended (its row was deleted, migrations/0013).
    case runEnded(DeviceID)
    /// The robot stored a new epoch of the sealed device (migrations/0014).
    case sealedEpoch(DeviceID, epoch: Int)
    /// An owner's app signed a roster for the device's robot (migrations/0014).
    case rosterProposed(DeviceID, id: Int64)
    /// The device's settings changed (migrations/0017): its versions now.
    case settings(DeviceID, SettingsVersions)
    /// Entries of the device's timeline were stored (v1.6): the newest one's number, and the
    /// newest a guest may see (nil: none of these).
    case timeline(DeviceID, newest: Int64, newestForGuests: Int64?)
    /// `node` accepted the first socket of `devices`: other nodes close theirs.
    case claim(node: String, devices: [DeviceID])
    /// Handoffs are waiting in `device_handoffs` for `toNode`.
    case handoff(toNode: String)

    public static let credentialsChannel = "wimz_credentials"
    public static let clusterChannel = "wimz_cluster"

    /// The channel this notification is sent on.
    public var channel: String {
        switch self {
        case .token, .device, .turnSecret, .push, .liveActivity, .runEnded, .sealedEpoch, .rosterProposed, .settings, .timeline: return Self.credentialsChannel
        case .claim, .handoff: return Self.clusterChannel
        }
    }

    /// The payload as sent.
    public var payload: String {
        switch self {
        case .token(let id): return "token:\(id)"
        case .device(let device): return "device:\(device.rawValue)"
        case .turnSecret(let realm): return "turn_secret:\(realm)"
        case .push(let device): return "push:\(device.rawValue)"
        case .liveActivity(let device): return "live:\(device.rawValue)"
        case .runEnded(let device): return "run:\(device.rawValue)"
        case .sealedEpoch(let device, let epoch): return "sealed:\(device.rawValue) \(epoch)"
        case .rosterProposed(let device, let id): return "roster:\(device.rawValue) \(id)"
        case .settings(let device, let versions):
            return "settings:\(device.rawValue) \(versions.desired) \(versions.reported.map(String.init) ?? "-")"
        case .timeline(let device, let newest, let guests):
            return "timeline:\(device.rawValue) \(newest) \(guests.map(String.init) ?? "-")"
        case .claim(let node, let devices): return (["claim", node] + devices.map(\.rawValue)).joined(separator: " ")
        case .handoff(let node): return "handoff \(node)"
        }
    }

    /// Reads a received notification; nil for a channel or payload not in the grammar.
    public init?(_ note: PGNotification) {
        switch note.channel {
        case Self.credentialsChannel:
            let parts = note.payload.split(separator: ":", maxSplits: 1)
            guard parts.count == 2 else { return nil }
            switch parts[0] {
            case "token": guard let id = Int64(parts[1]) else { return nil }; self = .token(id: id)
            case "device": guard let device = DeviceID(String(parts[1])) else { return nil }; self = .device(device)
            case "turn_secret": self = .turnSecret(realm: String(parts[1]))
            case "push": guard let device = DeviceID(String(parts[1])) else { return nil }; self = .push(device)
            case "live": guard let device = DeviceID(String(parts[1])) else { return nil }; self = .liveActivity(device)
            case "run": guard let device = DeviceID(String(parts[1])) else { return nil }; self = .runEnded(device)
            case "sealed", "roster":
                let words = parts[1].split(separator: " ")
                guard words.count == 2, let device = DeviceID(String(words[0])), let number = Int64(words[1]) else { return nil }
                self = parts[0] == "sealed" ? .sealedEpoch(device, epoch: Int(number)) : .rosterProposed(device, id: number)
            case "settings", "timeline":
                let words = parts[1].split(separator: " ")
                guard words.count == 3, let device = DeviceID(String(words[0])), let first = Int64(words[1]) else { return nil }
                let second = Int64(words[2])
                guard second != nil || words[2] == "-" else { return nil }
                self = parts[0] == "settings" ? .settings(device, SettingsVersions(desired: first, reported: second))
                    : .timeline(device, newest: first, newestForGuests: second)
            default: return nil
            }
        case Self.clusterChannel:
            let words = note.payload.split(separator: " ")
            guard words.count >= 2 else { return nil }
            switch words[0] {
            case "claim": self = .claim(node: String(words[1]), devices: words.dropFirst(2).compactMap { DeviceID(String($0)) })
            case "handoff" where words.count == 2: self = .handoff(toNode: String(words[1]))
            default: return nil
            }
        default:
            return nil
        }
    }
}
