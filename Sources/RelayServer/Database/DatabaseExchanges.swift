import CLibWebSockets
import RelayCore
import RelayStore
import RelayWorkers

/// A request answered by the database worker: waiting for its body, then for the worker.
final class DatabaseExchange {
    let id: UInt64
    let client: HTTPClient
    var request: AdminAPI.Request
    /// The admin operation, for requests of the admin API.
    var endpoint: AdminAPI.Endpoint?
    var response: HTTPResponse?
    let startedAt: UInt64
    let peerAddress: String
    /// Told the answer on the service thread before it is written (what the caller learns from it).
    var onAnswer: ((HTTPResponse) -> Void)?

    init(id: UInt64, client: HTTPClient, request: AdminAPI.Request, startedAt: UInt64, peerAddress: String) {
        self.id = id
        self.client = client
        self.request = request
        self.startedAt = startedAt
        self.peerAddress = peerAddress
    }
}

/// HTTP requests answered from the database (the admin API, pairing, cluster presence): filed by
/// id, run one at a time by the `DatabaseWorker` on its thread, answered on the service thread
/// when the worker's result arrives through the mailbox.
final class DatabaseExchanges {
    let worker: DatabaseWorker
    private let env: RelayEnvironment
    private let authenticator: Authenticator
    private let mailbox: Mailbox<ServiceEvent>
    private var exchanges: [UInt64: DatabaseExchange] = [:]
    private var byClient: [HTTPClient: UInt64] = [:]
    private var nextID: UInt64 = 0

    init(env: RelayEnvironment, worker: DatabaseWorker, authenticator: Authenticator, mailbox: Mailbox<ServiceEvent>) {
        self.env = env
        self.authenticator = authenticator
        self.mailbox = mailbox
        self.worker = worker
    }

    /// An admin route (the token checked): reads the query arguments the route declares, then
    /// defers the request to the database worker (after its body, for POST).
    func beginAdmin(_ request: HTTPRequest, _ endpoint: AdminAPI.Endpoint, route: Route, id: String?,
                    body: [UInt8]?) -> HTTPResponse? {
        let (method, path) = request.methodAndPath
        var query: [String: String] = [:]
        for key in route.query {
            do throws(RelayError) {
                if let v = try request.head.argument(key) { query[key] = v }
            } catch {
                return .error(error)
            }
        }
        let exchange = register(request, AdminAPI.Request(method: method, path: path, id: id, query: query, body: [],
                                                          remoteAddress: authenticator.clientAddress(request), at: env.clock.wall()))
        exchange.endpoint = endpoint
        if let body {
            // The gate read the whole body already.
            exchange.request.body = body
            dispatch(exchange)
            return nil
        }
        // lws reports a body only when one was announced; without one the request is complete now.
        let announced = Int(request.head.header("content-length") ?? "") ?? 0
        if method == "GET" || announced == 0 { dispatch(exchange) }
        return nil
    }

    /// `LWS_CALLBACK_HTTP_BODY` (TLS served by lws): collects the body (bounded).
    func bodyChunk(_ client: HTTPClient, _ bytes: UnsafeRawBufferPointer) {
        guard let id = byClient[client], let exchange = exchanges[id] else { return }
        guard exchange.request.body.count + bytes.count <= HTTPGate.bodyLimit else {
            finish(exchange, .error(.tooLarge, "admin request bodies are limited to 64 KiB"))
            return
        }
        exchange.request.body += bytes
    }

    /// `LWS_CALLBACK_HTTP_BODY_COMPLETION`: the body is complete; run the request.
    func bodyComplete(_ client: HTTPClient) {
        guard let id = byClient[client], let exchange = exchanges[id], exchange.response == nil else { return }
        dispatch(exchange)
    }

    private func dispatch(_ exchange: DatabaseExchange) {
        guard let endpoint = exchange.endpoint else { return }
        let request = exchange.request
        let configuration = env.configuration
        submit(exchange) { db in
            do {
                let (status, body) = try AdminAPI.handle(endpoint, request, db: db, configuration: configuration)
                return .json(status, body)
            } catch let refusal as RelayError {
                return .error(refusal)
            }
        }
    }

    /// Answers `request` from the database worker (`job`), or with `unavailable` when the
    /// database cannot be reached (default: 503 with Retry-After). Returns nil: answered later.
    /// `onAnswer` hears the answer on the service thread before it is written.
    func answer(_ request: HTTPRequest, unavailable: HTTPResponse? = nil, onAnswer: ((HTTPResponse) -> Void)? = nil,
                _ job: @escaping @Sendable (PGConnection) throws -> HTTPResponse) -> HTTPResponse? {
        let (method, path) = request.methodAndPath
        let exchange = register(request, AdminAPI.Request(method: method, path: path, query: [:], body: [],
                                                          remoteAddress: authenticator.clientAddress(request), at: env.clock.wall()))
        exchange.onAnswer = onAnswer
        submit(exchange, unavailable: unavailable, job)
        return nil
    }

    private func register(_ request: HTTPRequest, _ databaseRequest: AdminAPI.Request) -> DatabaseExchange {
        nextID += 1
        let exchange = DatabaseExchange(id: nextID, client: request.client, request: databaseRequest,
                                        startedAt: env.clock.monotonic(), peerAddress: request.peerAddress)
        exchanges[exchange.id] = exchange
        byClient[request.client] = exchange.id
        return exchange
    }

    private func submit(_ exchange: DatabaseExchange, unavailable: HTTPResponse? = nil,
                        _ job: @escaping @Sendable (PGConnection) throws -> HTTPResponse) {
        let id = exchange.id
        let mailbox = self.mailbox
        let queued = worker.submit({ db in
            // A refusal decided in the transaction (the household's and the seal's rules) is its answer.
            let response: HTTPResponse
            do { response = try job(db) } catch let refusal as RelayError { response = .error(refusal) }
            mailbox.post(.databaseAnswer(id, response))
        }, failed: { error in
            let isUnavailable = (error as? StoreError)?.kind == .unavailable
            mailbox.post(.databaseAnswer(id, isUnavailable
                ? unavailable ?? .error(.storeUnavailable, "database unreachable; retry shortly", headers: [("Retry-After", "1")])
                : .error(.internalError, "\(error)")))
        })
        if !queued {
            env.counters.databaseQueueFull += 1
            // Answered on the next pass of the loop, like every deferred answer.
            mailbox.post(.databaseAnswer(id, .error(.busy, "too many requests wait for the database; retry shortly",
                                                    headers: [("Retry-After", "1")])))
        }
    }

    /// A worker's answer arrived (service thread): write it when the socket is writeable.
    func answered(_ id: UInt64, _ response: HTTPResponse) {
        guard let exchange = exchanges[id] else { return }  // the client went away
        exchange.onAnswer?(response)
        finish(exchange, response)
    }

    private func finish(_ exchange: DatabaseExchange, _ response: HTTPResponse) {
        guard exchange.response == nil else { return }
        exchange.response = response
        // At once where the connection has its answerer (the gate); else lws writes it when the
        // connection is writeable (TLS served by lws).
        guard let answerer = exchange.client.answerer else {
            lws_callback_on_writable(exchange.client.handle)
            return
        }
        logAnswer(exchange, response)
        forget(exchange.client)
        answerer.respond(exchange.client, with: response)
    }

    /// `LWS_CALLBACK_HTTP_WRITEABLE` (TLS served by lws): sends a finished response.
    func writeable(_ client: HTTPClient) -> Int32 {
        guard let id = byClient[client], let exchange = exchanges[id], let response = exchange.response else { return 0 }
        forget(client)
        logAnswer(exchange, response)
        guard LWSHTTP.send(response, on: client.handle) else { return -1 }
        return lws_http_transaction_completed(client.handle) != 0 ? -1 : 0
    }

    private func logAnswer(_ exchange: DatabaseExchange, _ response: HTTPResponse) {
        env.logRequest(method: exchange.request.method, path: exchange.request.path, remote: exchange.peerAddress,
                       status: response.status, startedAt: exchange.startedAt)
    }

    /// The client's connection closed (or its exchange finished).
    func forget(_ client: HTTPClient) {
        if let id = byClient.removeValue(forKey: client) { exchanges[id] = nil }
    }
}

extension DatabaseExchanges: MetricsReporting {
    func report(to metrics: MetricsSink) {
        metrics.gauge("wimz_database_queue_depth", "Requests waiting for the database worker.", worker.queued)
    }
}
