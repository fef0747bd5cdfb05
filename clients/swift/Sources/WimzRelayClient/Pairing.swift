import Foundation
import WimzProtocol
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

extension RelayClient {
    /// Redeems a pairing code the robot showed (docs/protocol.md v1.1 "Pairing a phone"), or an owner's
    /// invitation (v1.3), for an app token:
    /// `POST {relay}/api/pairing`. Throws ``RelayClientError/http(status:code:message:)`` with
    /// `invalid_code` (wrong, used or expired) or `rate_limited`.
    public static func pair(relay url: URL, code: String, label: String, session: URLSession = .shared) async throws -> PairedDevice {
        var request = URLRequest(url: relayURL(url, WimzProtocol.Path.pairing))
        request.httpMethod = "POST"
        request.setValue("application/json", forHTTPHeaderField: "Content-Type")
        request.httpBody = Data(JSON.object(["code": .string(code), "label": .string(label)]).text.utf8)
        let (data, response) = try await exchange(request, session: session)
        let status = (response as? HTTPURLResponse)?.statusCode ?? 0
        guard status == 201 else { throw RelayClientError.refusal(status: status, body: data) }
        let body = (try? JSON(parsing: String(decoding: data, as: UTF8.self))) ?? .null
        guard let device = body["device_id"]?.stringValue, let token = body["token"]?.stringValue,
              let tokenID = body["token_id"]?.intValue else {
            throw RelayClientError.invalidResponse("pairing: \(String(decoding: data, as: UTF8.self).prefix(200))")
        }
        return PairedDevice(deviceID: device, token: token, tokenID: Int64(tokenID), access: MemberAccess(body))
    }
}

/// What a redeemed pairing code gives the app: keep the token in the Keychain.
public struct PairedDevice: Sendable, Equatable {
    public var deviceID: String
    public var token: String
    public var tokenID: Int64
    /// What the code made of this app (v1.3): an owner for a robot's pairing code, the
    /// invitation's access for an owner's invite.
    public var access: MemberAccess?
}
