#if canImport(NIOPosix)
import Foundation
import NIOCore
import NIOHTTP1
import NIOPosix
import NIOSSL
import NIOWebSocket

/// WebSocket connections on SwiftNIO: the transport where `URLSessionWebSocketTask` does not
/// exist (Linux). Unlike a generic client it keeps the status and body of a refused upgrade,
/// which the relay uses to say why (401 bad token, 403 wrong device, 429 over the cap…).
public struct NIOWebSocketTransport: WebSocketTransport {
    /// The largest message accepted from the server (the relay's limit is at most 1 MiB).
    public var maxMessageBytes: Int
    /// How long the TCP (and TLS) connect may take.
    public var connectTimeout: Duration

    public init(maxMessageBytes: Int = 1 << 20, connectTimeout: Duration = .seconds(10)) {
        self.maxMessageBytes = maxMessageBytes
        self.connectTimeout = connectTimeout
    }

    /// Held while a connection's pipeline is put together. Two connections set up at the same
    /// moment on two event-loop threads make the Swift runtime's first lookups of the pipeline's
    /// generic types and conformances concurrently, and the Linux runtime (6.3) then sometimes
    /// crashes (SIGSEGV in swift_conformsToProtocolMaybeInstantiateSuperclasses). Setting up one
    /// pipeline at a time costs a client nothing and avoids it.
    private static let pipelineSetup = NSLock()

    private enum UpgradeOutcome: Sendable {
        case upgraded(NIOAsyncChannel<WebSocketFrame, WebSocketFrame>)
        case refused(EventLoopFuture<WebSocketUpgradeRefused>)
    }

    public func connect(to url: URL, headers: [String: String]) async throws -> any WebSocketConnection {
        guard let components = URLComponents(url: url, resolvingAgainstBaseURL: false),
              let scheme = components.scheme?.lowercased(), scheme == "ws" || scheme == "wss",
              let host = components.host, !host.isEmpty
        else { throw URLError(.badURL) }
        let secure = scheme == "wss"
        let port = components.port ?? (secure ? 443 : 80)
        let target = (components.percentEncodedPath.isEmpty ? "/" : components.percentEncodedPath)
            + (components.percentEncodedQuery.map { "?" + $0 } ?? "")
        let hostHeader = components.port.map { "\(host):\($0)" } ?? host
        let tls = secure ? try NIOSSLContext(configuration: .makeClientConfiguration()) : nil
        let maxFrameSize = maxMessageBytes
        let timeout = TimeAmount.milliseconds(Int64(connectTimeout.components.seconds * 1000))

        let opening = Locked<(any Channel)?>(nil)
        let outcome = try await ClientBootstrap(group: MultiThreadedEventLoopGroup.singleton)
            .connectTimeout(timeout)
            .connect(host: host, port: port) { channel in
                opening.withLock { $0 = channel }
                return channel.eventLoop.makeCompletedFuture { try NIOWebSocketTransport.pipelineSetup.withLock {
                    if let tls {
                        try channel.pipeline.syncOperations.addHandler(NIOSSLClientHandler(context: tls, serverHostname: host))
                    }
                    let upgrader = NIOTypedWebSocketClientUpgrader<UpgradeOutcome>(
                        maxFrameSize: maxFrameSize,
                        upgradePipelineHandler: { channel, _ in
                            channel.eventLoop.makeCompletedFuture {
                                .upgraded(try NIOAsyncChannel(wrappingChannelSynchronously: channel))
                            }
                        })
                    var requestHeaders = HTTPHeaders([("Host", hostHeader)])
                    for (name, value) in headers { requestHeaders.add(name: name, value: value) }
                    let configuration = NIOTypedHTTPClientUpgradeConfiguration<UpgradeOutcome>(
                        upgradeRequestHead: HTTPRequestHead(version: .http1_1, method: .GET, uri: target, headers: requestHeaders),
                        upgraders: [upgrader],
                        notUpgradingCompletionHandler: { channel in
                            // The response is handed on after this returns: read it to the end.
                            channel.eventLoop.makeCompletedFuture {
                                let promise = channel.eventLoop.makePromise(of: WebSocketUpgradeRefused.self)
                                try channel.pipeline.syncOperations.addHandler(RefusalReader(promise: promise))
                                return .refused(promise.futureResult)
                            }
                        })
                    var pipeline = NIOUpgradableHTTPClientPipelineConfiguration(upgradeConfiguration: configuration)
                    // The relay's first frames often share a TCP segment with the 101: keep them.
                    pipeline.leftOverBytesStrategy = .forwardBytes
                    return try channel.pipeline.syncOperations.configureUpgradableHTTPClientPipeline(configuration: pipeline)
                } }
            }
        // The upgrade's answer may never come (a server that accepts and then says nothing): the
        // connect timeout and the caller's cancellation bound it by closing the connection.
        let channel = opening.withLock { $0 }
        let deadline = channel?.eventLoop.scheduleTask(in: timeout) { channel?.close(promise: nil) }
        defer { deadline?.cancel() }
        let answer = try await withTaskCancellationHandler {
            try await outcome.get()
        } onCancel: {
            channel?.close(promise: nil)
        }
        switch answer {
        case .upgraded(let upgraded): return NIOWebSocketConnection(channel: upgraded)
        case .refused(let refusal): throw try await refusal.get()
        }
    }
}

/// Collects a refused upgrade's response (status, headers, body), then closes the connection.
private final class RefusalReader: ChannelInboundHandler, RemovableChannelHandler {
    typealias InboundIn = HTTPClientResponsePart

    private let promise: EventLoopPromise<WebSocketUpgradeRefused>
    private var status: Int?
    private var headers: [String: String] = [:]
    private var body = ByteBuffer()
    private var finished = false

    init(promise: EventLoopPromise<WebSocketUpgradeRefused>) { self.promise = promise }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        switch unwrapInboundIn(data) {
        case .head(let head):
            status = Int(head.status.code)
            for header in head.headers { headers[header.name.lowercased()] = header.value }
        case .body(var chunk):
            if body.readableBytes < 64 * 1024 { body.writeBuffer(&chunk) }
        case .end:
            finish(context)
        }
    }

    func channelInactive(context: ChannelHandlerContext) {
        finish(context)
        context.fireChannelInactive()
    }

    func errorCaught(context: ChannelHandlerContext, error: any Error) {
        finish(context)
    }

    private func finish(_ context: ChannelHandlerContext) {
        guard !finished else { return }
        finished = true
        if let status {
            promise.succeed(WebSocketUpgradeRefused(status: status, headers: headers,
                                                    body: String(buffer: body)))
        } else {
            promise.fail(ChannelError.inputClosed)
        }
        context.close(promise: nil)
    }
}

/// An upgraded connection: one task reads frames (joining fragments, answering pings, echoing
/// the peer's close), another writes what `send` and the reader queue.
private final class NIOWebSocketConnection: WebSocketConnection {
    let events: AsyncStream<WebSocketEvent>
    private let outbound: AsyncStream<WebSocketFrame>.Continuation
    private let channel: any Channel
    private let finished: Task<Void, Never>
    /// Pings waiting for their pong, by payload.
    private let pongs = PongWaiters()

    init(channel asyncChannel: NIOAsyncChannel<WebSocketFrame, WebSocketFrame>) {
        let (events, eventSink) = AsyncStream.makeStream(of: WebSocketEvent.self)
        let (frames, frameSink) = AsyncStream.makeStream(of: WebSocketFrame.self)
        self.events = events
        self.outbound = frameSink
        self.channel = asyncChannel.channel
        let pongs = self.pongs
        finished = Task {
            defer { pongs.failAll() }
            var end = WebSocketEvent.closed(code: nil, reason: "")
            do {
                end = try await asyncChannel.executeThenClose { inbound, writer in
                    try await withThrowingTaskGroup(of: Void.self) { group in
                        group.addTask {
                            for await frame in frames { try await writer.write(frame) }
                        }
                        defer { frameSink.finish() }
                        return try await Self.read(inbound, replies: frameSink, events: eventSink, pongs: pongs)
                    }
                }
            } catch {
                // The connection failed (reset, TLS error): reported as a close without a code.
            }
            eventSink.yield(end)
            eventSink.finish()
        }
    }

    /// Reads until the peer's close frame (returned) or the end of the stream.
    private static func read(_ inbound: NIOAsyncChannelInboundStream<WebSocketFrame>,
                             replies: AsyncStream<WebSocketFrame>.Continuation,
                             events: AsyncStream<WebSocketEvent>.Continuation, pongs: PongWaiters) async throws -> WebSocketEvent {
        var message: [UInt8] = []
        var messageIsText = true
        for try await frame in inbound {
            var data = frame.unmaskedData
            switch frame.opcode {
            case .ping:
                replies.yield(WebSocketFrame(fin: true, opcode: .pong, maskKey: .random(), data: data))
                events.yield(.ping)
            case .pong:
                pongs.arrived(Array(data.readableBytesView))
            case .connectionClose:
                let code = data.readInteger(as: UInt16.self)
                let reason = data.readString(length: data.readableBytes) ?? ""
                // Echo the close (RFC 6455 §5.5.1); the server then closes the TCP connection.
                var echo = ByteBufferAllocator().buffer(capacity: 2)
                if let code { echo.writeInteger(code) }
                replies.yield(WebSocketFrame(fin: true, opcode: .connectionClose, maskKey: .random(), data: echo))
                return .closed(code: code, reason: reason)
            case .text, .binary, .continuation:
                if frame.opcode != .continuation {
                    message.removeAll(keepingCapacity: true)
                    messageIsText = frame.opcode == .text
                }
                message.append(contentsOf: data.readableBytesView)
                if frame.fin {
                    events.yield(messageIsText ? .text(String(decoding: message, as: UTF8.self)) : .binary(message))
                    message.removeAll(keepingCapacity: true)
                }
            default:
                break
            }
        }
        return .closed(code: nil, reason: "")
    }

    func send(text: String) async throws {
        let frame = WebSocketFrame(fin: true, opcode: .text, maskKey: .random(), data: ByteBuffer(string: text))
        if case .terminated = outbound.yield(frame) { throw RelayClientError.notConnected }
    }

    func send(binary: [UInt8]) async throws {
        let frame = WebSocketFrame(fin: true, opcode: .binary, maskKey: .random(), data: ByteBuffer(bytes: binary))
        if case .terminated = outbound.yield(frame) { throw RelayClientError.notConnected }
    }

    /// Sends a ping and returns with its pong; throws when the connection ends first, or
    /// `CancellationError` as soon as the calling task is cancelled.
    func ping() async throws {
        let payload = (0..<8).map { _ in UInt8.random(in: 0...255) }
        let pongs = self.pongs
        try await withTaskCancellationHandler {
            try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<Void, any Error>) in
                pongs.wait(for: payload, continuation)
                let frame = WebSocketFrame(fin: true, opcode: .ping, maskKey: .random(), data: ByteBuffer(bytes: payload))
                if case .terminated = outbound.yield(frame) { pongs.failAll() }
            }
        } onCancel: {
            pongs.cancel(payload)
        }
    }

    func abort() async {
        channel.close(promise: nil)
        await finished.value
    }

    func close(code: UInt16) async {
        var payload = ByteBufferAllocator().buffer(capacity: 2)
        payload.writeInteger(code)
        outbound.yield(WebSocketFrame(fin: true, opcode: .connectionClose, maskKey: .random(), data: payload))
        // The server answers with its close and hangs up; don't wait for a silent one forever.
        let channel = self.channel
        channel.eventLoop.scheduleTask(in: .seconds(2)) { channel.close(promise: nil) }
        await finished.value
    }
}
/// Continuations of ``NIOWebSocketConnection/ping()`` until their pong (or the end) comes.
private final class PongWaiters: @unchecked Sendable {
    private let lock = NSLock()
    private var waiting: [[UInt8]: CheckedContinuation<Void, any Error>] = [:]
    /// Pings cancelled before they waited (the cancellation handler can run first).
    private var cancelled: Set<[UInt8]> = []
    private var ended = false

    func wait(for payload: [UInt8], _ continuation: CheckedContinuation<Void, any Error>) {
        lock.lock()
        if ended || cancelled.remove(payload) != nil {
            let error: any Error = ended ? RelayClientError.notConnected : CancellationError()
            lock.unlock()
            continuation.resume(throwing: error)
            return
        }
        waiting[payload] = continuation
        lock.unlock()
    }

    /// The caller stopped waiting: its continuation ends now with `CancellationError`.
    func cancel(_ payload: [UInt8]) {
        lock.lock()
        guard let continuation = waiting.removeValue(forKey: payload) else {
            if !ended { cancelled.insert(payload) }
            lock.unlock()
            return
        }
        lock.unlock()
        continuation.resume(throwing: CancellationError())
    }

    func arrived(_ payload: [UInt8]) {
        lock.lock()
        let continuation = waiting.removeValue(forKey: payload)
        lock.unlock()
        continuation?.resume()
    }

    func failAll() {
        lock.lock()
        ended = true
        let all = waiting.values
        waiting.removeAll()
        lock.unlock()
        for continuation in all { continuation.resume(throwing: RelayClientError.notConnected) }
    }
}
#endif
