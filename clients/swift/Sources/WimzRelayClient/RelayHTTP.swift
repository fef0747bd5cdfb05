import Foundation
import WimzProtocol
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

/// One HTTP call to the relay with the bearer token: the body of the expected answer, the
/// relay's refusal as a typed ``RelayClientError``, no answer as ``RelayClientError/notConnected``.
func relayCall(_ request: URLRequest, token: String, session: URLSession, expecting status: Int = 200) async throws -> Data {
    var request = request
    request.setValue("Bearer \(token)", forHTTPHeaderField: "Authorization")
    request.setValue("application/json", forHTTPHeaderField: "Accept")
    if request.httpBody != nil { request.setValue("application/json", forHTTPHeaderField: "Content-Type") }
    let (data, response): (Data, URLResponse)
    do {
        (data, response) = try await session.data(for: request)
    } catch {
        throw RelayClientError.notConnected
    }
    let answered = (response as? HTTPURLResponse)?.statusCode ?? 0
    guard answered == status else { throw RelayClientError.refusal(status: answered, body: data) }
    return data
}

/// `base` followed by one of the protocol's paths (`WimzProtocol.Path`: `/api/devices/ID/status`, …);
/// the base's own path (a relay behind a prefix) stays in front.
public func relayURL(_ base: URL, _ path: String) -> URL {
    base.appendingPathComponent(String(path.drop { $0 == "/" }))
}

/// The JSON error the relay gives `token` (`GET /api/devices/ID/status`), for WebSocket
/// transports that lose a refused upgrade's body.
func refusalBody(base: URL, device: String, token: String, session: URLSession) async -> String {
    var request = URLRequest(url: relayURL(base, WimzProtocol.Path.device(device, .status)))
    request.setValue("Bearer \(token)", forHTTPHeaderField: "Authorization")
    guard let (data, _) = try? await session.data(for: request) else { return "" }
    return String(decoding: data, as: UTF8.self)
}
