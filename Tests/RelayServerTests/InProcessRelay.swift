import Foundation
import RelayCore
import RelayCrypto
import RelayStore
import RelayWorkers
@testable import RelayServer

/// The loop the stop sequence ends, without lws.
final class FakeLoop: LoopControl {
    private(set) var finished = false
    private(set) var acceptsConnections = true
    func finish() { finished = true }
    func stopAccepting() { acceptsConnections = false }
}

/// The relay's components in this process: no lws context, no socket, no database thread
/// started. Requests are values, clients are made-up handles, deferred answers are recorded,
/// and time is a `ManualClock`.
final class InProcessRelay {
    let clock = ManualClock()
    let loop = FakeLoop()
    let components: RelayComponents
    let mailbox = Mailbox<ServiceEvent>(wake: {})
    /// The WebSocket connections' socket layer (see `upgrade(_:token:peer:)`).
    let webSocketIO = RecordingWebSocketIO()
    private(set) var deferred: [(client: HTTPClient, response: HTTPResponse)] = []
    private var nextClient = 1
    private var nextTokenID: Int64 = 1
    /// The tokens "in the store" (`storeReady`).
    private var stored: [CredentialEntry] = []
    /// False: lookups go unanswered (the store unreachable; a request goes on as after its wait).
    var storeAnswers = true

    init(_ configure: (inout RelayConfiguration) -> Void = { _ in }) {
        var configuration = RelayConfiguration(databaseURL: "host=/nonexistent-wimz dbname=x", migrationsDirectory: "")
        configuration.spoolDirectory = FileManager.default.temporaryDirectory.appendingPathComponent("wimz-inprocess-\(UUID())").path
        configure(&configuration)
        // Built as the daemon builds them, never started: no thread, no connection.
        let workers = Workers(configuration: configuration,
                              identity: .init(nodeID: "test-node", address: "127.0.0.1:1", incarnation: UUID().uuidString),
                              migrator: Migrator(migrations: []), mailbox: mailbox, clock: clock.clock)
        let env = RelayEnvironment(configuration: configuration, clock: clock.clock, thread: ServiceThread(),
                                   audit: AuditTrail(writer: workers.audit, node: "test-node", clock: clock.clock))
        components = RelayComponents(env: env, workers: workers, mailbox: mailbox, loop: loop,
                                     gateListener: nil, webSocketIO: webSocketIO)
    }

    /// The store monitor's first report: ready, with these tokens in the store (read when a
    /// client presents one, see `present(_:token:)`).
    func storeReady(_ entries: [CredentialEntry] = []) {
        components.store.handle(.health(StoreHealth(state: .ready, reason: "ok")))
        stored = entries
    }

    /// What the gate does with a head before anything else: its credential read once, and a
    /// token the relay does not hold looked up — here answered at once from `stored`, as the store
    /// monitor would. The head as the gate passes it on (its credential on it), or the gate's
    /// answer when the lookup was refused.
    func present(_ head: HTTPRequestHead, peer: String) -> (head: HTTPRequestHead, refusal: HTTPResponse?) {
        var head = head
        head.credential = components.authenticator.presentedCredential(in: head)
        var resumed = false
        switch components.authenticator.awaitCredential(for: head, peer: { peer }, then: { resumed = true }) {
        case .ready: return (head, nil)
        case .refused(let error): return (head, .error(error))
        case .waiting:
            guard storeAnswers, let digest = head.credential?.digest else { return (head, nil) }
            components.store.handle(.credentialsFound(digests: [digest], entries: stored.filter { $0.token.digest == DigestKey(digest) }))
            precondition(resumed, "the lookup's answer did not resume its request")
            return (head, nil)
        }
    }

    /// A token of `device`, as the store would report it.
    func token(_ device: String, _ role: Role, expiresIn seconds: Int64? = nil) -> (secret: String, entry: CredentialEntry) {
        let secret = "wimz_\(role == .robot ? "r" : "a")_test\(nextTokenID)"
        let token = TokenCredential(id: nextTokenID, deviceID: DeviceID(device)!, role: role, digest: DigestKey(BearerToken.digest(secret)),
                                    expiresAt: seconds.map { clock.wall.adding(seconds: $0) }, revokedAt: nil, access: .owner, control: false)
        nextTokenID += 1
        return (secret, CredentialEntry(token: token, deviceDisabled: false))
    }

    /// Sends `method path` through the router from a new client; nil: answered later.
    func request(_ method: String, _ target: String, token: String? = nil, headers: [(String, String)] = [],
                 body: [UInt8] = [], peer: String = "198.51.100.7") -> HTTPResponse? {
        let lines = [("Host", "relay")] + (token.map { [("Authorization", "Bearer \($0)")] } ?? []) + headers
        let text = "\(method) \(target) HTTP/1.1\r\n" + lines.map { "\($0.0): \($0.1)\r\n" }.joined() + "\r\n"
        guard case .complete(let parsed, _) = HTTPRequestHead.parse(Array(text.utf8)) else { fatalError("bad test request \(text)") }
        let client = HTTPClient(newHandle(), answeredBy: self)
        let (head, refusal) = present(parsed, peer: peer)
        if let refusal { return refusal }
        return components.router.route(HTTPRequest(client: client, head: head, peerAddress: peer), body: body)
    }
}

/// Deferred answers are recorded, as the gate would write them.
extension InProcessRelay: DeferredAnswering {
    func respond(_ client: HTTPClient, with response: HTTPResponse) { deferred.append((client, response)) }
}

extension InProcessRelay {
    /// A handle no other client of this relay has (what lws's `wsi` is to the components).
    func newHandle() -> OpaquePointer {
        defer { nextClient += 1 }
        return OpaquePointer(bitPattern: nextClient)!
    }
}

extension HTTPResponse {
    /// The JSON body's top-level members.
    var json: [String: Any] { (try? JSONSerialization.jsonObject(with: Data(body))) as? [String: Any] ?? [:] }
    func header(_ name: String) -> String? { headers.first { $0.0.lowercased() == name.lowercased() }?.1 }
}
