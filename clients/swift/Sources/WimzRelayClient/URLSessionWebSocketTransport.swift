import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

/// WebSocket connections on `URLSessionWebSocketTask`, the default on Apple platforms. A refused
/// upgrade is reported with its status code; URLSession does not hand over the body. On Linux it
/// builds against FoundationNetworking (the same API), so the compiler checks it there too; it
/// runs only where URLSession speaks WebSocket (Debian's libcurl does not).
public struct URLSessionWebSocketTransport: WebSocketTransport {
    public let session: URLSession
    /// How long opening (TCP, TLS, upgrade) may take: URLSession's own default is 60 s.
    public var openTimeout: Duration
    /// How long a ping waits for its pong before it fails (the client's liveness check usually
    /// gives up first): URLSession may call its completion twice, or never.
    public var pingTimeout: Duration

    public init(session: URLSession = .shared, openTimeout: Duration = .seconds(10), pingTimeout: Duration = .seconds(30)) {
        self.session = session
        self.openTimeout = openTimeout
        self.pingTimeout = pingTimeout
    }

    public func connect(to url: URL, headers: [String: String]) async throws -> any WebSocketConnection {
        var request = URLRequest(url: url)
        for (name, value) in headers { request.setValue(value, forHTTPHeaderField: name) }
        let task = session.webSocketTask(with: request)
        task.resume()
        // The task opens lazily and has no "opened" callback without a delegate: a ping
        // round trip tells an open socket from a refused upgrade.
        do {
            try await firstAnswer(within: openTimeout) { done in task.sendPing(pongReceiveHandler: done) }
        } catch {
            task.cancel()
            if let http = task.response as? HTTPURLResponse, http.statusCode != 101 {
                var fields: [String: String] = [:]
                for (name, value) in http.allHeaderFields { fields["\(name)".lowercased()] = "\(value)" }
                throw WebSocketUpgradeRefused(status: http.statusCode, headers: fields, body: "")
            }
            throw error
        }
        return URLSessionWebSocketConnection(task: task, pingTimeout: pingTimeout)
    }
}

private final class URLSessionWebSocketConnection: WebSocketConnection, @unchecked Sendable {
    // URLSessionWebSocketTask is thread-safe; the class only holds it and the stream.
    let events: AsyncStream<WebSocketEvent>
    private let task: URLSessionWebSocketTask
    private let pingTimeout: Duration

    init(task: URLSessionWebSocketTask, pingTimeout: Duration) {
        self.task = task
        self.pingTimeout = pingTimeout
        let (events, sink) = AsyncStream.makeStream(of: WebSocketEvent.self)
        self.events = events
        Task {
            while true {
                do {
                    switch try await task.receive() {
                    case .string(let text): sink.yield(.text(text))
                    case .data(let data): sink.yield(.binary([UInt8](data)))
                    @unknown default: break
                    }
                } catch {
                    let code = task.closeCode == .invalid ? nil : UInt16(task.closeCode.rawValue)
                    let reason = task.closeReason.map { String(decoding: $0, as: UTF8.self) } ?? ""
                    sink.yield(.closed(code: code, reason: reason))
                    sink.finish()
                    return
                }
            }
        }
    }

    func send(text: String) async throws {
        do { try await task.send(.string(text)) } catch { throw RelayClientError.notConnected }
    }

    func send(binary: [UInt8]) async throws {
        do { try await task.send(.data(Data(binary))) } catch { throw RelayClientError.notConnected }
    }

    func ping() async throws {
        do {
            try await firstAnswer(within: pingTimeout) { done in task.sendPing(pongReceiveHandler: done) }
        } catch is CancellationError {
            throw CancellationError()
        } catch {
            throw RelayClientError.notConnected
        }
    }

    func close(code: UInt16) async {
        task.cancel(with: URLSessionWebSocketTask.CloseCode(rawValue: Int(code)) ?? .normalClosure, reason: nil)
    }
}
