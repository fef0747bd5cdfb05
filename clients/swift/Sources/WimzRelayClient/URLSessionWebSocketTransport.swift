import Foundation
import WimzProtocol
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

/// WebSocket connections on `URLSessionWebSocketTask`, the default on Apple platforms, the Apple
/// way: a session of its own whose `URLSessionWebSocketDelegate` says when a socket opened
/// (`didOpenWithProtocol`) and how it closed (`didCloseWith`); a refused upgrade ends the task
/// with the relay's status and headers — URLSession never hands over the body, so the relay's
/// `Wimz-Error` header names the code, with no second request. On Apple platforms the session
/// waits for connectivity: opened without a network, a socket opens when the network is back
/// instead of failing into the back-off (the open timeout does not run while it waits).
///
/// On Linux it builds against FoundationNetworking (the same API, `waitsForConnectivity` aside),
/// so the compiler checks it there too; it runs only where URLSession speaks WebSocket (Debian's
/// libcurl does not: ``NIOWebSocketTransport`` is Linux's).
public final class URLSessionWebSocketTransport: WebSocketTransport {
    public let session: URLSession
    /// How long opening (TCP, TLS, upgrade) may take once the network is there: URLSession's own
    /// default is 60 s.
    public let openTimeout: Duration
    /// How long a ping waits for its pong before it fails (the client's liveness check usually
    /// gives up first): URLSession may call its completion twice, or never.
    public let pingTimeout: Duration
    private let tasks: WebSocketTaskEvents

    /// `configuration`: the session's (default: `.default`); on Apple platforms its
    /// `waitsForConnectivity` is set.
    public init(configuration: URLSessionConfiguration = .default, openTimeout: Duration = .seconds(10),
                pingTimeout: Duration = .seconds(30)) {
        #if canImport(Darwin)
        configuration.waitsForConnectivity = true
        #endif
        let tasks = WebSocketTaskEvents()
        self.tasks = tasks
        session = URLSession(configuration: configuration, delegate: tasks, delegateQueue: nil)
        self.openTimeout = openTimeout
        self.pingTimeout = pingTimeout
    }

    deinit { session.finishTasksAndInvalidate() }  // a session holds its delegate until invalidated

    public func connect(to url: URL, headers: [String: String]) async throws -> any WebSocketConnection {
        var request = URLRequest(url: url)
        for (name, value) in headers { request.setValue(value, forHTTPHeaderField: name) }
        let task = session.webSocketTask(with: request)
        let (events, sink) = AsyncStream.makeStream(of: WebSocketEvent.self)
        try await tasks.open(task, within: openTimeout, closes: sink)
        return URLSessionWebSocketConnection(task: task, events: events, sink: sink, pingTimeout: pingTimeout)
    }
}

/// The session's delegate: each task's opening (resumed by `didOpenWithProtocol`, or failed by the
/// task's end, its timeout or its caller's cancellation) and the stream its close goes to.
final class WebSocketTaskEvents: NSObject, URLSessionWebSocketDelegate, @unchecked Sendable {
    private struct Opening {
        var resume: CheckedContinuation<Void, Error>?
        var waitingForConnectivity = false
    }

    // Every field under `lock`: URLSession calls in on its own queue, callers on theirs.
    private let lock = NSLock()
    private var openings: [Int: Opening] = [:]
    private var closes: [Int: AsyncStream<WebSocketEvent>.Continuation] = [:]

    /// Resumes `task` and returns when it is open; throws ``WebSocketUpgradeRefused``, a
    /// transport error, or `CancellationError` (the task is cancelled with the caller).
    func open(_ task: URLSessionWebSocketTask, within timeout: Duration,
              closes sink: AsyncStream<WebSocketEvent>.Continuation) async throws {
        let id = task.taskIdentifier
        lock.withLock { closes[id] = sink }
        let deadline = Task { [weak self] in
            while true {
                try await sleepOnDispatch(for: timeout)
                guard let self, lock.withLock({ openings[id]?.waitingForConnectivity == true }) else { break }
            }
            self?.finishOpening(id, with: .failure(RelayClientError.notConnected))
            task.cancel()
        }
        defer { deadline.cancel() }
        do {
            try await withTaskCancellationHandler {
                try await withCheckedThrowingContinuation { (resume: CheckedContinuation<Void, Error>) in
                    lock.withLock { openings[id] = Opening(resume: resume) }
                    task.resume()
                }
            } onCancel: {
                finishOpening(id, with: .failure(CancellationError()))
                task.cancel()
            }
        } catch {
            _ = lock.withLock { closes.removeValue(forKey: id) }
            throw Task.isCancelled ? CancellationError() : error  // cancelled before it was asked to open, too
        }
    }

    private func finishOpening(_ id: Int, with result: Result<Void, Error>) {
        let resume = lock.withLock { () -> CheckedContinuation<Void, Error>? in
            defer { openings[id]?.resume = nil }
            return openings[id]?.resume
        }
        resume?.resume(with: result)
    }

    /// The task's socket is gone: its stream ends with `event` (the receive loop may have ended it).
    func closed(_ id: Int, _ event: WebSocketEvent) {
        let sink = lock.withLock { closes.removeValue(forKey: id) }
        sink?.yield(event)
        sink?.finish()
    }

    // MARK: URLSessionWebSocketDelegate

    func urlSession(_ session: URLSession, webSocketTask: URLSessionWebSocketTask, didOpenWithProtocol protocol: String?) {
        finishOpening(webSocketTask.taskIdentifier, with: .success(()))
    }

    func urlSession(_ session: URLSession, webSocketTask: URLSessionWebSocketTask,
                    didCloseWith closeCode: URLSessionWebSocketTask.CloseCode, reason: Data?) {
        closed(webSocketTask.taskIdentifier, closeEvent(closeCode, reason))
    }

    func urlSession(_ session: URLSession, taskIsWaitingForConnectivity task: URLSessionTask) {
        lock.withLock { openings[task.taskIdentifier]?.waitingForConnectivity = true }
    }

    func urlSession(_ session: URLSession, task: URLSessionTask, didCompleteWithError error: Error?) {
        let id = task.taskIdentifier
        if let http = task.response as? HTTPURLResponse, http.statusCode != 101 {
            var fields: [String: String] = [:]
            for (name, value) in http.allHeaderFields { fields["\(name)".lowercased()] = "\(value)" }
            finishOpening(id, with: .failure(WebSocketUpgradeRefused(status: http.statusCode, headers: fields, body: "")))
        } else {
            finishOpening(id, with: .failure(RelayClientError.notConnected))
        }
        lock.withLock { _ = openings.removeValue(forKey: id) }
        closed(id, .closed(code: nil, reason: ""))  // no close frame came, or its event went first
    }
}

/// A close as the stream reports it (`.invalid`: no close frame came).
private func closeEvent(_ code: URLSessionWebSocketTask.CloseCode, _ reason: Data?) -> WebSocketEvent {
    .closed(code: code == .invalid ? nil : UInt16(code.rawValue), reason: reason.map { String(decoding: $0, as: UTF8.self) } ?? "")
}

private final class URLSessionWebSocketConnection: WebSocketConnection, @unchecked Sendable {
    // URLSessionWebSocketTask is thread-safe; the class only holds it and the stream.
    let events: AsyncStream<WebSocketEvent>
    private let task: URLSessionWebSocketTask
    private let pingTimeout: Duration

    init(task: URLSessionWebSocketTask, events: AsyncStream<WebSocketEvent>, sink: AsyncStream<WebSocketEvent>.Continuation,
         pingTimeout: Duration) {
        self.task = task
        self.events = events
        self.pingTimeout = pingTimeout
        // Messages in order; the end of the stream is the delegate's (`didCloseWith`, or the
        // task's end), or a failed receive's when the delegate has nothing to add.
        Task {
            while true {
                do {
                    switch try await task.receive() {
                    case .string(let text): sink.yield(.text(text))
                    case .data(let data): sink.yield(.binary([UInt8](data)))
                    @unknown default: break
                    }
                } catch {
                    sink.yield(closeEvent(task.closeCode, task.closeReason))
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
