import Testing
import WimzProtocol
@testable import RelayCore

/// The relay's own events are written as bytes; they must be exactly what encoding the
/// contract's JSON object gives (same members, same order, same escaping).
struct RelayMessagesTests {
    func encoded(_ json: JSONValue) -> [UInt8] { json.encodedBytes }

    func deviceStatusTree(_ device: String, online: Bool, since: UnixTime, history: (String, UInt64)?,
                          recovered: Bool?) -> [UInt8] {
        var data: [(String, JSONValue)] = [("device_id", .string(device)), ("online", .bool(online)),
                                           ("since", .string(since.iso8601))]
        if let history { data += [("epoch", .string(history.0)), ("seq", .int(Int64(history.1)))] }
        if let recovered { data.append(("recovered", .bool(recovered))) }
        return encoded(.object([("type", "event"), ("event", "device_status"), ("data", .object(data))]))
    }

    @Test(arguments: [false, true])
    func deviceStatusIsTheContractsObject(online: Bool) {
        let since = UnixTime(seconds: 1_764_000_000)
        for history in [nil, ("e\"p\\och", UInt64(0)), ("7f3a", UInt64(Int64.max))] as [(String, UInt64)?] {
            for recovered in [nil, false, true] as [Bool?] {
                let written = RelayMessages.deviceStatus(DeviceID("wimz-01_a.b")!, online: online, since: since,
                                                         history: history.map { (epoch: $0.0, seq: $0.1) }, recovered: recovered)
                #expect(written.bytes == deviceStatusTree("wimz-01_a.b", online: online, since: since, history: history,
                                                          recovered: recovered))
            }
        }
    }

    @Test func appPresenceIsTheContractsObject() {
        for apps in [0, 1, 9, 10, 12345] {
            #expect(RelayMessages.appPresence(apps: apps).bytes
                    == encoded(.object([("type", "event"), ("event", "app_presence"), ("data", .object([("apps", .int(Int64(apps)))]))])))
        }
    }
}
