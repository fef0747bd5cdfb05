#if canImport(Darwin)
import Foundation

/// WebSocket connections on `URLSessionWebSocketTask` (Apple platforms). A refused upgrade is
/// reported with its status code; URLSession does not hand over the body.
public struct URLSessionWebSocketTransport: WebSocketTransport {
    public let session: URLSession

    public init(session: URLSession = .shared) { self.session = session }

    public func connect(to url: URL, headers: [String: String]) async throws -> any WebSocketConnection {
        var request = URLRequest(url: url)
        for (name, value) in headers { request.setValue(value, forHTTPHeaderField: name) }
        let task = session.webSocketTask(with: request)
        task.resume()
        // The task opens lazily and has no "opened" callback without a delegate: a ping
        // round trip tells an open socket from a refused upgrade.
        do {
            try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<Void, any Error>) in
                task.sendPing { error in
                    if let error { continuation.resume(throwing: error) } else { continuation.resume() }
                }
            }
        } catch {
            if let http = task.response as? HTTPURLResponse, http.statusCode != 101 {
                var fields: [String: String] = [:]
                for (name, value) in http.allHeaderFields { fields["\(name)".lowercased()] = "\(value)" }
                throw WebSocketUpgradeRefused(status: http.statusCode, headers: fields, body: "")
            }
            throw error
        }
        return URLSessionWebSocketConnection(task: task)
    }
}

private final class URLSessionWebSocketConnection: WebSocketConnection, @unchecked Sendable {
    // URLSessionWebSocketTask is thread-safe; the class only holds it and the stream.
    let events: AsyncStream<WebSocketEvent>
    private let task: URLSessionWebSocketTask

    init(task: URLSessionWebSocketTask) {
        self.task = task
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
        try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<Void, any Error>) in
            task.sendPing { error in
                if error != nil { continuation.resume(throwing: RelayClientError.notConnected) } else { continuation.resume() }
            }
        }
    }

    func close(code: UInt16) async {
        task.cancel(with: URLSessionWebSocketTask.CloseCode(rawValue: Int(code)) ?? .normalClosure, reason: nil)
    }
}
#endif
