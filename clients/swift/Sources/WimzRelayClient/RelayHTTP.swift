import Foundation
import WimzProtocol
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

/// One HTTP call to the relay with the bearer token: the body of the expected answer, the
/// relay's refusal as a typed ``RelayClientError``, no answer as ``RelayClientError/notConnected``,
/// and `CancellationError` at once when the calling task is cancelled. A GET (the relay answers it
/// alike however often it is asked) is sent again beside the first by `retry` while unanswered.
func relayCall(_ request: URLRequest, token: String, session: URLSession, expecting status: Int = 200,
               retry: RequestRetry? = nil) async throws -> Data {
    guard let retry, (request.httpMethod ?? "GET") == "GET" else {
        return try await relayCallOnce(request, token: token, session: session, expecting: status)
    }
    return try await staggered(every: retry.wait, attempts: retry.attempts, clock: retry.clock, isFinal: RequestRetry.isFinal) {
        try await relayCallOnce(request, token: token, session: session, expecting: status)
    }
}

/// How a request is sent again on a lossy link: after `wait` unanswered (the link's measured
/// ``LinkEstimate/requestWait``), `attempts` in all, each left running; the first answer wins.
struct RequestRetry: Sendable {
    var wait: Duration
    var attempts = 3
    var clock: RelayClientClock

    /// Any answer ends the race (the relay would say the same again); only no answer does not.
    static func isFinal(_ error: any Error) -> Bool { (error as? RelayClientError) != .notConnected }
}

private func relayCallOnce(_ request: URLRequest, token: String, session: URLSession, expecting status: Int) async throws -> Data {
    var request = request
    request.setValue("Bearer \(token)", forHTTPHeaderField: "Authorization")
    request.setValue("application/json", forHTTPHeaderField: "Accept")
    if request.httpBody != nil { request.setValue("application/json", forHTTPHeaderField: "Content-Type") }
    let (data, response) = try await exchange(request, session: session)
    let answered = (response as? HTTPURLResponse)?.statusCode ?? 0
    guard answered == status else { throw RelayClientError.refusal(status: answered, body: data) }
    return data
}

/// `base` followed by one of the protocol's paths (`WimzProtocol.Path`: `/api/devices/ID/status`, …);
/// the base's own path (a relay behind a prefix) stays in front.
public func relayURL(_ base: URL, _ path: String) -> URL {
    base.appendingPathComponent(String(path.drop { $0 == "/" }))
}

/// `session.data(for:)`, ended by the caller's cancellation (`CancellationError`; the request is
/// cancelled with it, except with FoundationNetworking) even where the platform's URLSession would
/// finish it first; any other failure is ``RelayClientError/notConnected``.
func exchange(_ request: URLRequest, session: URLSession) async throws -> (Data, URLResponse) {
    #if canImport(FoundationNetworking)
    // FoundationNetworking (Linux) can crash the process ("a task that in not in the registry")
    // when a request is cancelled as its transfer ends: there the request runs out, its answer dropped.
    let cancelsRequest = false
    #else
    let cancelsRequest = true
    #endif
    do {
        return try await cancellable(cancelsOperation: cancelsRequest) { try await session.data(for: request) }
    } catch is CancellationError {
        throw CancellationError()
    } catch {
        throw RelayClientError.notConnected
    }
}
