import Foundation
import WimzProtocol
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

/// One TURN credential from `GET /api/turn/credentials` (docs/protocol.md), ready for WebRTC.
public struct TurnCredentials: Sendable, Equatable, Decodable {
    /// One `RTCIceServer` entry: STUN first, then the TURN URLs with the credential.
    public struct ICEServer: Sendable, Equatable, Decodable {
        public var urls: [String]
        public var username: String?
        public var credential: String?
    }

    public var urls: [String]
    public var username: String
    public var credential: String
    public var ttl: Int
    public var expiresAt: Date
    /// From here on fetch a new one (issue + ttl/2); existing TURN allocations stay up.
    public var refreshAt: Date
    public var iceServers: [ICEServer]

    enum CodingKeys: String, CodingKey {
        case urls, username, credential, ttl
        case expiresAt = "expires_at", refreshAt = "refresh_at", iceServers = "ice_servers"
    }

    /// Until `refreshAt`.
    public func isFresh(at now: Date = Date()) -> Bool { now < refreshAt }

    /// Parses the endpoint's JSON body.
    public static func decode(_ data: Data) throws -> TurnCredentials {
        let decoder = JSONDecoder()
        decoder.dateDecodingStrategy = .iso8601
        return try decoder.decode(TurnCredentials.self, from: data)
    }
}

/// `GET {base}/api/turn/credentials` with the bearer token.
func fetchTurnCredentials(base: URL, token: String, ttl: Int?, session: URLSession,
                          retry: RequestRetry) async throws -> TurnCredentials {
    var components = URLComponents(url: relayURL(base, WimzProtocol.Path.turnCredentials), resolvingAgainstBaseURL: false)!
    if let ttl { components.queryItems = [URLQueryItem(name: "ttl", value: String(ttl))] }
    let data = try await relayCall(URLRequest(url: components.url!), token: token, session: session, retry: retry)
    do {
        return try TurnCredentials.decode(data)
    } catch {
        throw RelayClientError.invalidResponse("TURN credentials: \(error)")
    }
}
