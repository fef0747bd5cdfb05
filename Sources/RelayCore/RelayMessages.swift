#if canImport(WimzProtocol)
import WimzProtocol
#endif

/// Relay-originated frames (PROTOCOL.md "relay-originated messages").
public enum RelayMessages {
    /// `{"type":"event","event":"device_status","data":{"device_id":ID,"online":BOOL,"since":ISO8601}}`
    /// For a recovering app (PROTOCOL.md v1.1) `data` also carries `"epoch":E,"seq":LAST`, and
    /// `"recovered":BOOL` when it resumed with `since`.
    public static func deviceStatus(_ device: DeviceID, online: Bool, since: UnixTime,
                                    history: (epoch: String, seq: UInt64)? = nil, recovered: Bool? = nil) -> Payload {
        var data: [(String, JSONValue)] = [("device_id", .string(device.rawValue)), ("online", .bool(online)),
                                           ("since", .string(since.iso8601))]
        if let history { data += [("epoch", .string(history.epoch)), ("seq", .int(Int64(history.seq)))] }
        if let recovered { data.append(("recovered", .bool(recovered))) }
        return Payload(json: .object([("type", .string(WimzProtocol.MessageType.event)), ("event", .string(WimzProtocol.RelayEventName.deviceStatus)), ("data", .object(data))]))
    }

    /// `{"type":"event","event":"app_presence","data":{"apps":N}}`
    public static func appPresence(apps: Int) -> Payload {
        Payload(json: .object([("type", .string(WimzProtocol.MessageType.event)), ("event", .string(WimzProtocol.RelayEventName.appPresence)),
                               ("data", .object([("apps", .int(Int64(apps)))]))]))
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
