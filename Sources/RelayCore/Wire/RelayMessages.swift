import WimzProtocol

/// Relay-originated frames (docs/protocol.md "Frames on the sockets").
public enum RelayMessages {
    /// `{"type":"event","event":"device_status","data":{"device_id":ID,"online":BOOL,"since":ISO8601}}`
    /// For a recovering app (docs/protocol.md v1.1) `data` also carries `"epoch":E,"seq":LAST`, and
    /// `"recovered":BOOL` when it resumed with `since`. The greeting of an app socket carries
    /// `"member":{"token_id","access","control","until"}`: the app's own access (v1.3; a
    /// project addition, docs/protocol.md).
    ///
    /// Written straight into bytes (a `JSONValue` tree cost ~5,000 instructions a message, and
    /// every connect and disconnect sends one to each app); `RelayMessagesTests` holds it to the
    /// tree's encoding.
    public static func deviceStatus(_ device: DeviceID, online: Bool, since: UnixTime,
                                    history: (epoch: String, seq: UInt64)? = nil, recovered: Bool? = nil,
                                    member: JSONValue? = nil) -> Payload {
        var out = started(deviceStatusHead, capacity: 192)
        JSONValue.appendLiteral(#"{"device_id":"#, to: &out)
        JSONValue.appendQuoted(device.rawValue, to: &out)
        JSONValue.appendLiteral(#","online":"#, to: &out)
        JSONValue.appendLiteral(online ? "true" : "false", to: &out)
        JSONValue.appendLiteral(#","since":"#, to: &out)
        since.appendQuotedISO8601(to: &out)
        if let history {
            JSONValue.appendLiteral(#","epoch":"#, to: &out)
            JSONValue.appendQuoted(history.epoch, to: &out)
            JSONValue.appendLiteral(#","seq":"#, to: &out)
            JSONValue.appendDecimal(history.seq, to: &out)
        }
        if let recovered {
            JSONValue.appendLiteral(#","recovered":"#, to: &out)
            JSONValue.appendLiteral(recovered ? "true" : "false", to: &out)
        }
        if let member {
            JSONValue.appendLiteral(#","member":"#, to: &out)
            out += member.encodedBytes
        }
        JSONValue.appendLiteral("}}", to: &out)
        return Payload(out)
    }

    /// `{"type":"event","event":"app_presence","data":{"apps":N}}`
    public static func appPresence(apps: Int) -> Payload {
        var out = started(appPresenceHead, capacity: 64)
        JSONValue.appendLiteral(#"{"apps":"#, to: &out)
        JSONValue.appendDecimal(Int64(apps), to: &out)
        JSONValue.appendLiteral("}}", to: &out)
        return Payload(out)
    }

    /// `{"type":"epoch","epoch":E}`: a sealed device's new epoch (v1.5), for its apps.
    public static func epoch(_ epoch: Int) -> Payload {
        var out: [UInt8] = []
        JSONValue.appendLiteral(#"{"type":"epoch","epoch":"#, to: &out)
        JSONValue.appendDecimal(Int64(epoch), to: &out)
        JSONValue.appendLiteral("}", to: &out)
        return Payload(out)
    }

    /// `{"type":"event","event":NAME,"data":` — the relay's events, up to their data's value.
    /// Encoded once per name: these go out on every connect and disconnect.
    /// `{"type":"settings","version":V,"doc":DOC}`: the desired settings, for the robot (v1.6);
    /// `doc` the document's JSON text as it was written.
    public static func settings(version: Int64, doc: String) -> Payload {
        var out: [UInt8] = []
        out.reserveCapacity(doc.utf8.count + 48)
        JSONValue.appendLiteral(#"{"type":"settings","version":"#, to: &out)
        JSONValue.appendDecimal(version, to: &out)
        JSONValue.appendLiteral(#","doc":"#, to: &out)
        out.append(contentsOf: doc.utf8)
        out.append(UInt8(ascii: "}"))
        return Payload(out)
    }

    /// `{"type":"timeline","newest":ID}`: entries of the device's timeline were stored (v1.6).
    public static func timeline(newest id: String) -> Payload {
        Payload(Array(#"{"type":"timeline","newest":""#.utf8) + Array(id.utf8) + Array(#""}"#.utf8))
    }

    /// `{"type":"settings_changed","desired_version":V,"reported_version":W}` for the apps (v1.6):
    /// a version the device lacks is null.
    public static func settingsChanged(desired: Int64?, reported: Int64?) -> Payload {
        Payload(JSONValue.object([("type", .string("settings_changed")), ("desired_version", desired.map(JSONValue.int) ?? .null),
                                  ("reported_version", reported.map(JSONValue.int) ?? .null)]).encodedBytes)
    }

    private static func eventHead(_ name: String) -> [UInt8] {
        var out: [UInt8] = []
        JSONValue.appendLiteral(#"{"type":"#, to: &out)
        JSONValue.appendQuoted(WimzProtocol.MessageType.event, to: &out)
        JSONValue.appendLiteral(#","event":"#, to: &out)
        JSONValue.appendQuoted(name, to: &out)
        JSONValue.appendLiteral(#","data":"#, to: &out)
        return out
    }

    private static let deviceStatusHead = eventHead(WimzProtocol.RelayEventName.deviceStatus)
    private static let appPresenceHead = eventHead(WimzProtocol.RelayEventName.appPresence)

    /// A message's bytes so far: `head`, with room for `capacity` in all.
    private static func started(_ head: [UInt8], capacity: Int) -> [UInt8] {
        var out: [UInt8] = []
        out.reserveCapacity(capacity)
        out.append(contentsOf: head)
        return out
    }

    /// `{"type":"error","code":CODE,"message":TEXT,"id":ID?}`; `idToken` is the raw JSON id.
    public static func error(_ code: ErrorCode, _ message: String, idToken: [UInt8]? = nil) -> Payload {
        var fields: [(String, JSONValue)] = [("type", .string(WimzProtocol.MessageType.error)), ("code", .string(code.rawValue)),
                                             ("message", .string(message))]
        if let idToken { fields.append(("id", .raw(String(decoding: idToken, as: UTF8.self)))) }
        return Payload(json: .object(fields))
    }

    /// `{"type":"event","event":"turn_credentials","data":BODY}` with BODY the HTTP endpoint's JSON.
    public static func turnCredentials(body: String) -> Payload {
        Payload(json: .object([("type", .string(WimzProtocol.MessageType.event)), ("event", .string(WimzProtocol.RelayEventName.turnCredentials)), ("data", .raw(body))]))
    }
}
