import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
import WimzSealed

// How an app learns the robot's key without the relay (docs/protocol.md "Sealed devices
// (v1.5)"): the first owner pairs on the home network, and everyone else joins by an invitation
// link that carries the robot's verification code next to the invitation's.

extension SealedHousehold {
    /// The first owner's pairing on the LAN while the robot's pairing window is open: hands
    /// this app's public keys to the robot (which pins them as its first owner) and takes the
    /// robot's from the answer. `robot`: the robot's pairing address, e.g.
    /// `http://192.168.1.20:8765`.
    /// - Throws: ``RelayClientError/http(status:code:message:)`` with the robot's refusal
    ///   (`pairing_closed`, `already_paired`), `.notConnected` when it did not answer,
    ///   `.invalidResponse` when the answer is not the keys of `deviceID`'s robot.
    public static func pairOnLAN(robot: URL, identity: SealedIdentity, deviceID: String,
                                 session: URLSession = .shared) async throws -> SealedHousehold {
        var request = URLRequest(url: robot.appendingPathComponent("wimz/sealed/owner"))
        request.httpMethod = "POST"
        request.setValue("application/json", forHTTPHeaderField: "Content-Type")
        let keys = identity.publicKeys
        request.httpBody = Data(JSON.object(["kid": .string(keys.kid), "sign": .string(Base64URL.encode(keys.sign)),
                                             "hpke": .string(Base64URL.encode(keys.hpke))]).text.utf8)
        let (data, response) = try await exchange(request, session: session)
        let status = (response as? HTTPURLResponse)?.statusCode ?? 0
        guard status == 200 else { throw RelayClientError.refusal(status: status, body: data) }
        guard let answer = try? JSON(parsing: String(decoding: data, as: UTF8.self)), answer["device_id"]?.stringValue == deviceID,
              let sign = answer["sign"]?.stringValue.flatMap(Base64URL.decode), let hpke = answer["hpke"]?.stringValue.flatMap(Base64URL.decode),
              let robotKeys = try? PublicKeys(sign: sign, hpke: hpke), robotKeys.kid == answer["kid"]?.stringValue
        else { throw RelayClientError.invalidResponse("pairing: not the keys of \(deviceID)'s robot") }
        return SealedHousehold(identity: identity, verifiedRobot: robotKeys)
    }
}

/// An invitation to a sealed household as a link an owner sends over any channel but the relay:
/// `wimz://join?device=ID&code=CODE&robot=ROBOT-CODE`. The invited app redeems `code`
/// (``RelayClient/pair(relay:code:label:session:)``) and sets ``SealedHousehold/robotCode``, so
/// the robot's key it later gets through the relay is checked against the owner's word for it.
public struct SealedInvitation: Sendable, Equatable {
    public var deviceID: String
    /// The invitation's code (v1.3).
    public var code: String
    /// The robot's verification code (``PublicKeys/verificationCode``).
    public var robotCode: String

    public init(deviceID: String, code: String, robotCode: String) {
        (self.deviceID, self.code, self.robotCode) = (deviceID, code, robotCode)
    }

    /// The link's parts; nil when `url` is not such a link.
    public init?(url: URL) {
        guard url.scheme == "wimz", url.host == "join",
              let items = URLComponents(url: url, resolvingAgainstBaseURL: false)?.queryItems,
              let device = items.first(where: { $0.name == "device" })?.value,
              let code = items.first(where: { $0.name == "code" })?.value,
              let robot = items.first(where: { $0.name == "robot" })?.value
        else { return nil }
        self.init(deviceID: device, code: code, robotCode: robot)
    }

    public var url: URL {
        var components = URLComponents()
        (components.scheme, components.host) = ("wimz", "join")
        components.queryItems = [URLQueryItem(name: "device", value: deviceID), URLQueryItem(name: "code", value: code),
                                 URLQueryItem(name: "robot", value: robotCode)]
        return components.url!
    }
}
