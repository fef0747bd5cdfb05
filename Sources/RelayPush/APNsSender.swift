import AsyncHTTPClient
import Foundation
import Logging
import NIOCore
import NIOPosix
import NIOSSL
import RelayCore
import RelayCrypto

#if canImport(Glibc)
import Glibc
#endif

/// Where and as whom pushes are sent (the `WIMZ_APNS_*` settings).
public struct APNsSettings: Sendable {
    public var keyFile: String
    public var identity: ProviderToken.Identity
    /// The app's bundle id.
    public var topic: String
    public var productionURL: String
    public var sandboxURL: String
    /// A CA to trust besides the system's (a stand-in APNs in tests).
    public var caFile: String?
    /// Pushes that may wait to be sent; past it a push is dropped and counted.
    public var queueCapacity = 10_000
    /// Sends in flight at once (HTTP/2 streams over the kept connection).
    public var concurrency = 128
    /// How long APNs (and our retries) may keep trying to deliver a push (`apns-expiration`).
    public var expirationSeconds: Int64 = 3600

    public init(keyFile: String, identity: ProviderToken.Identity, topic: String, productionURL: String, sandboxURL: String,
                caFile: String?) {
        self.keyFile = keyFile
        self.identity = identity
        self.topic = topic
        self.productionURL = productionURL
        self.sandboxURL = sandboxURL
        self.caFile = caFile
    }
}

/// What became of one push (counted in `/metrics` by kind and result).
public struct PushOutcome: Sendable {
    public enum Result: String, Sendable, CaseIterable {
        case delivered
        /// 410 `Unregistered` or 400 `BadDeviceToken`: the registration must go.
        case unregistered
        /// Another 4xx (a malformed push, a wrong topic): dropped.
        case rejected
        /// 429/5xx or the connection failed until `apns-expiration`: dropped.
        case expired
        /// The queue was full when it came.
        case queueFull = "queue_full"
        /// The provider token was refused even freshly minted (wrong key, key id or team).
        case providerAuth = "provider_auth"
    }

    public var message: PushMessage
    public var result: Result
    /// The last HTTP status (0: none) and APNs's `reason`.
    public var status: Int
    public var reason: String
    /// Enqueued → answered, in seconds.
    public var latency: Double
}

/// A Live Activity request as the sender carries it: the request, its body, and the delay before
/// a retry if APNs asks to wait (the coordinator decides retries; the sender tries once).
public struct LiveActivityPush: Sendable {
    public var request: LiveActivityRequest
    public var body: [UInt8]
    public var retryDelay: Double

    public init(request: LiveActivityRequest, body: [UInt8], retryDelay: Double) {
        self.request = request
        self.body = body
        self.retryDelay = retryDelay
    }
}

/// What became of one Live Activity request (docs/protocol.md v1.4 "Answers").
public struct LiveActivityOutcome: Sendable {
    public enum Result: String, Sendable, CaseIterable {
        case delivered
        /// 410, or 400 `BadDeviceToken` / `DeviceTokenNotForTopic`: the token must go.
        case unregistered
        /// 429, 5xx or no connection: the coordinator retries (with the newest state).
        case throttled
        /// Another 4xx: dropped.
        case rejected
        case queueFull = "queue_full"
        case providerAuth = "provider_auth"
    }

    public var push: LiveActivityPush
    public var result: Result
    public var status: Int
    public var reason: String
    public var latency: Double
}

/// Sends pushes to APNs (docs/protocol.md v1.2): HTTP/2 over TLS with async-http-client on an event
/// loop of its own — never the relay's service thread — through one kept, multiplexed connection
/// per APNs host. Fed through a bounded queue: `enqueue` never blocks and drops (counted) when
/// it is full. Retries 429 and 5xx with back-off until the push's expiration; a fresh provider
/// token and one retry after `ExpiredProviderToken`. Every outcome goes to `onOutcome`, on the
/// sender's own threads.
public final class APNsSender: @unchecked Sendable {
    private let settings: APNsSettings
    private let token: ProviderToken
    private let client: HTTPClient
    private let group: MultiThreadedEventLoopGroup
    private let onOutcome: @Sendable (PushOutcome) -> Void
    private let onLiveActivityOutcome: @Sendable (LiveActivityOutcome) -> Void
    /// One queue for both kinds: they share the connection and the bound.
    enum Item: Sendable {
        case alert(PushMessage)
        case liveActivity(LiveActivityPush)
    }
    private let queue = Locked<(items: [(Item, UInt64)], head: Int, waiting: CheckedContinuation<Void, Never>?, stopped: Bool)>(([], 0, nil, false))
    private let inFlight = Locked(0)
    private let log = Logger(label: "wimz.push")
    private var consumer: Task<Void, Never>?

    public init(settings: APNsSettings, onOutcome: @escaping @Sendable (PushOutcome) -> Void,
                onLiveActivityOutcome: @escaping @Sendable (LiveActivityOutcome) -> Void = { _ in }) throws {
        self.settings = settings
        self.onOutcome = onOutcome
        self.onLiveActivityOutcome = onLiveActivityOutcome
        guard let pem = FileContents.read(settings.keyFile) else { throw ES256Signer.KeyError.unreadable }
        token = try ProviderToken(keyPEM: pem, identity: settings.identity)
        var tls = TLSConfiguration.makeClientConfiguration()
        if let ca = settings.caFile { tls.additionalTrustRoots = [.file(ca)] }
        tls.applicationProtocols = ["h2"]
        var configuration = HTTPClient.Configuration(tlsConfiguration: tls, timeout: .init(connect: .seconds(10), read: .seconds(30)))
        configuration.httpVersion = .automatic
        group = MultiThreadedEventLoopGroup(numberOfThreads: 1)
        client = HTTPClient(eventLoopGroupProvider: .shared(group), configuration: configuration)
        consumer = Task { [unowned self] in await run() }
    }

    /// Pushes waiting to be sent.
    public var queueDepth: Int { queue.withLock { $0.items.count - $0.head } }

    /// Queues `message` (any thread; never blocks). False when the queue is full: the push is
    /// dropped and reported as `queueFull`.
    @discardableResult
    public func enqueue(_ message: PushMessage, now: UInt64 = MonotonicClock.nanoseconds()) -> Bool {
        let accepted = enqueue(.alert(message), now: now)
        if !accepted { onOutcome(PushOutcome(message: message, result: .queueFull, status: 0, reason: "", latency: 0)) }
        return accepted
    }

    /// Queues a Live Activity request (any thread; never blocks); as `enqueue(_:now:)`.
    @discardableResult
    public func enqueue(_ push: LiveActivityPush, now: UInt64 = MonotonicClock.nanoseconds()) -> Bool {
        let accepted = enqueue(.liveActivity(push), now: now)
        if !accepted { onLiveActivityOutcome(LiveActivityOutcome(push: push, result: .queueFull, status: 0, reason: "", latency: 0)) }
        return accepted
    }

    private func enqueue(_ item: Item, now: UInt64) -> Bool {
        let (accepted, waiter) = queue.withLock { q -> (Bool, CheckedContinuation<Void, Never>?) in
            guard !q.stopped, q.items.count - q.head < settings.queueCapacity else { return (false, nil) }
            q.items.append((item, now))
            defer { q.waiting = nil }
            return (true, q.waiting)
        }
        waiter?.resume()
        return accepted
    }

    /// Reads the key file again (SIGHUP): the next provider token is signed with it.
    public func reloadKey() throws {
        guard let pem = FileContents.read(settings.keyFile) else { throw ES256Signer.KeyError.unreadable }
        try token.replaceKey(pem: pem)
    }

    /// Sends what is queued (for at most `seconds`), then closes the connection and its threads.
    public func shutdown(within seconds: Double) {
        let deadline = MonotonicClock.nanoseconds() + UInt64(seconds * 1e9)
        while (queueDepth > 0 || inFlight.withLock({ $0 }) > 0), MonotonicClock.nanoseconds() < deadline { usleep(20_000) }
        let waiter = queue.withLock { q -> CheckedContinuation<Void, Never>? in
            q.stopped = true
            defer { q.waiting = nil }
            return q.waiting
        }
        waiter?.resume()
        consumer?.cancel()
        try? client.syncShutdown()
        try? group.syncShutdownGracefully()
    }

    // MARK: - The worker

    private func run() async {
        await withTaskGroup(of: Void.self) { group in
            while let (item, enqueuedAt) = await next() {
                while inFlight.withLock({ $0 }) >= settings.concurrency { await group.next() }
                inFlight.withLock { $0 += 1 }
                group.addTask { [self] in
                    switch item {
                    case .alert(let message):
                        let outcome = await deliver(message, enqueuedAt: enqueuedAt)
                        inFlight.withLock { $0 -= 1 }
                        onOutcome(outcome)
                    case .liveActivity(let push):
                        let outcome = await deliver(push, enqueuedAt: enqueuedAt)
                        inFlight.withLock { $0 -= 1 }
                        onLiveActivityOutcome(outcome)
                    }
                }
            }
        }
    }

    private func next() async -> (Item, UInt64)? {
        while true {
            enum Step { case item(Item, UInt64), stop, wait }
            let step = queue.withLock { q -> Step in
                if q.stopped { return .stop }
                guard q.head < q.items.count else { return .wait }
                let item = q.items[q.head]
                q.head += 1
                if q.head > 1024, q.head * 2 > q.items.count {
                    q.items.removeFirst(q.head)
                    q.head = 0
                }
                return .item(item.0, item.1)
            }
            switch step {
            case .item(let message, let at): return (message, at)
            case .stop: return nil
            case .wait:
                await withCheckedContinuation { continuation in
                    let resumeNow = queue.withLock { q -> Bool in
                        if q.stopped || q.head < q.items.count { return true }
                        q.waiting = continuation
                        return false
                    }
                    if resumeNow { continuation.resume() }
                }
            }
        }
    }

    /// One push, with the retries the contract allows, to its outcome.
    private func deliver(_ message: PushMessage, enqueuedAt: UInt64) async -> PushOutcome {
        let expiration = Int64(time(nil)) + settings.expirationSeconds
        var delay = 1.0
        var refreshedToken = false
        var status = 0
        var reason = ""
        func outcome(_ result: PushOutcome.Result) -> PushOutcome {
            PushOutcome(message: message, result: result, status: status, reason: reason,
                        latency: Double(MonotonicClock.nanoseconds() - enqueuedAt) / 1e9)
        }
        while true {
            do {
                let jwt = try token.current()
                (status, reason) = try await send(message, jwt: jwt, expiration: expiration)
                switch status {
                case 200: return outcome(.delivered)
                case 410: return outcome(.unregistered)
                case 400 where reason == "BadDeviceToken": return outcome(.unregistered)
                case 403 where reason == "ExpiredProviderToken" && !refreshedToken:
                    token.invalidate(jwt)
                    refreshedToken = true
                    continue
                case 403 where ["ExpiredProviderToken", "InvalidProviderToken", "MissingProviderToken"].contains(reason):
                    log.error("apns_provider_token_refused", metadata: ["reason": "\(reason)"])
                    return outcome(.providerAuth)
                case 429, 500...599: break  // retried below
                default:
                    log.warning("apns_push_rejected", metadata: ["status": "\(status)", "reason": "\(reason)", "kind": "\(message.kind.rawValue)"])
                    return outcome(.rejected)
                }
            } catch {
                status = 0
                reason = "\(error)"
                log.warning("apns_unreachable", metadata: ["error": "\(error)"])
            }
            if Int64(time(nil)) + Int64(delay) >= expiration { return outcome(.expired) }
            try? await Task.sleep(for: .seconds(delay))
            if Task.isCancelled { return outcome(.expired) }
            delay = min(delay * 2, 60)
        }
    }

    /// `DEVICE.KIND`: a newer push of the same kind replaces the older on the phone. APNs takes at
    /// most 64 bytes; a longer one (device ids go to 64) names the device by a digest instead.
    static func collapseID(_ message: PushMessage) -> String {
        let plain = message.device.rawValue + "." + message.kind.rawValue
        guard plain.utf8.count > 64 else { return plain }
        let digest = Crypto.sha256(Array(message.device.rawValue.utf8)).prefix(16).map { String(format: "%02x", $0) }.joined()
        return digest + "." + message.kind.rawValue
    }

    /// `POST {base}/3/device/{token}`: the status and APNs's `reason` (empty when none).
    private func send(_ message: PushMessage, jwt: String, expiration: Int64) async throws -> (Int, String) {
        try await post(token: message.token, environment: message.environment, body: message.body, jwt: jwt,
                       headers: [("apns-topic", settings.topic), ("apns-push-type", "alert"),
                                 ("apns-collapse-id", Self.collapseID(message)), ("apns-expiration", String(expiration))])
    }

    /// One Live Activity request, tried once (a fresh provider token and one more try after
    /// `ExpiredProviderToken`): whether to wait and retry is the coordinator's to decide, with the
    /// newest state. It expires when it would show stale anyway.
    private func deliver(_ push: LiveActivityPush, enqueuedAt: UInt64) async -> LiveActivityOutcome {
        var status = 0, reason = "", jwt = ""
        func outcome(_ result: LiveActivityOutcome.Result) -> LiveActivityOutcome {
            LiveActivityOutcome(push: push, result: result, status: status, reason: reason,
                                latency: Double(MonotonicClock.nanoseconds() - enqueuedAt) / 1e9)
        }
        let request = push.request
        for attempt in 0..<2 {
            do {
                jwt = try token.current()
                (status, reason) = try await post(
                    token: request.token, environment: request.environment, body: push.body, jwt: jwt,
                    headers: [("apns-topic", settings.topic + ".push-type.liveactivity"), ("apns-push-type", "liveactivity"),
                              ("apns-priority", String(request.priority)), ("apns-expiration", String(request.timestamp + 3600))])
            } catch {
                reason = "\(error)"
                return outcome(.throttled)
            }
            switch status {
            case 200: return outcome(.delivered)
            case 410: return outcome(.unregistered)
            case 400 where reason == "BadDeviceToken" || reason == "DeviceTokenNotForTopic": return outcome(.unregistered)
            case 403 where reason == "ExpiredProviderToken" && attempt == 0:
                token.invalidate(jwt)
                continue
            case 403 where ["ExpiredProviderToken", "InvalidProviderToken", "MissingProviderToken"].contains(reason):
                log.error("apns_provider_token_refused", metadata: ["reason": "\(reason)"])
                return outcome(.providerAuth)
            case 429, 500...599: return outcome(.throttled)
            default:
                log.warning("apns_live_activity_rejected", metadata: ["status": "\(status)", "reason": "\(reason)",
                                                                       "event": "\(request.event.rawValue)"])
                return outcome(.rejected)
            }
        }
        return outcome(.providerAuth)
    }

    /// `POST {base}/3/device/{token}` with `headers`: the status and APNs's `reason` (empty when none).
    private func post(token: String, environment: PushRegistration.Environment, body: [UInt8], jwt: String,
                      headers: [(String, String)]) async throws -> (Int, String) {
        let base = environment == .production ? settings.productionURL : settings.sandboxURL
        var request = HTTPClientRequest(url: base + "/3/device/" + token)
        request.method = .POST
        request.headers.add(name: "authorization", value: "bearer " + jwt)
        for (name, value) in headers { request.headers.add(name: name, value: value) }
        request.headers.add(name: "content-type", value: "application/json")
        request.body = .bytes(ByteBuffer(bytes: body))
        let response = try await client.execute(request, timeout: .seconds(30))
        let body = try await response.body.collect(upTo: 64 * 1024)
        let status = Int(response.status.code)
        guard status != 200 else { return (200, "") }
        // APNs answers errors as {"reason":"…"}; anything else is logged as it came.
        let text = String(buffer: body)
        if case .object(let members)? = try? JSONReader.parse(Array(text.utf8)),
           let reason = members.first(where: { $0.0 == "reason" })?.1, case .string(let value) = reason {
            return (status, value)
        }
        return (status, String(text.prefix(200)))
    }
}
