import CLibWebSockets
import RelayCore
import RelayCrypto
import RelayStore

/// An admin request waiting for its body or for the database worker.
final class HTTPExchange {
    let id: UInt64
    let wsi: OpaquePointer
    var request: AdminAPI.Request
    var response: HTTPResponse?
    let startedAt: UInt64

    init(id: UInt64, wsi: OpaquePointer, request: AdminAPI.Request, startedAt: UInt64) {
        self.id = id
        self.wsi = wsi
        self.request = request
        self.startedAt = startedAt
    }
}

extension RelayServer {
    /// The admin API answers 404 while it is disabled and 401 without its token, before it
    /// says which of its paths and methods exist. Nil: the token is good.
    func adminRefusal(_ request: HTTPRequest) -> HTTPResponse? {
        guard let adminToken = configuration.adminToken else {
            return .error(404, "not_found", "the admin API is disabled (set WIMZ_ADMIN_TOKEN)")
        }
        // Hash both sides so the comparison's time depends on neither length nor content.
        guard let presented = bearerToken(request),
              Crypto.constantTimeEquals(Crypto.sha256(presented), Crypto.sha256(adminToken))
        else { return .authFailure(.unknownToken, message: "admin token required") }
        return nil
    }

    /// An admin route (the token checked): reads the query arguments the route declares, then
    /// defers the request to the database worker (after its body, for POST).
    func beginAdmin(_ request: HTTPRequest, route: Route, id: String?, body: [UInt8]?) -> HTTPResponse? {
        let (method, path) = request.methodAndPath
        var query: [String: String] = [:]
        for key in route.query {
            do throws(RequestError) {
                if let v = try request.head.argument(key) { query[key] = v }
            } catch {
                return .error(error.status, error.code, error.message)
            }
        }
        let exchange = register(request, AdminAPI.Request(method: method, path: path, pattern: route.pattern, id: id,
                                                          query: query, body: [], remoteAddress: clientAddress(request)))
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

    /// `LWS_CALLBACK_HTTP_BODY`: collects the body (bounded).
    func adminBody(_ wsi: OpaquePointer, _ input: UnsafeMutableRawPointer?, _ length: Int) -> Int32 {
        guard let id = exchangeByWsi[wsi], let exchange = exchanges[id] else { return 0 }
        guard exchange.request.body.count + length <= HTTPGate.bodyLimit else {
            finish(exchange, .error(413, "too_large", "admin request bodies are limited to 64 KiB"))
            return 0
        }
        if let input { exchange.request.body += UnsafeRawBufferPointer(start: input, count: length) }
        return 0
    }

    /// `LWS_CALLBACK_HTTP_BODY_COMPLETION`: the body is complete; run the request.
    func adminBodyComplete(_ wsi: OpaquePointer) {
        guard let id = exchangeByWsi[wsi], let exchange = exchanges[id], exchange.response == nil else { return }
        dispatch(exchange)
    }

    private func dispatch(_ exchange: HTTPExchange) {
        let request = exchange.request
        submit(exchange) { db in
            do {
                let (status, body) = try AdminAPI.handle(request, db: db)
                return .json(status, body)
            } catch let failure as AdminAPI.Failure {
                return .error(failure.status, failure.code, failure.message)
            }
        }
    }

    /// Answers `request` from the database worker (`job`), or with `unavailable` when the
    /// database cannot be reached (default: 503 with Retry-After). Returns nil: answered later.
    func answerFromDatabase(_ request: HTTPRequest, unavailable: HTTPResponse? = nil,
                            _ job: @escaping @Sendable (PGConnection) throws -> HTTPResponse) -> HTTPResponse? {
        let (method, path) = request.methodAndPath
        let exchange = register(request, AdminAPI.Request(method: method, path: path, query: [:], body: [],
                                                          remoteAddress: clientAddress(request)))
        submit(exchange, unavailable: unavailable, job)
        return nil
    }

    private func register(_ request: HTTPRequest, _ adminRequest: AdminAPI.Request) -> HTTPExchange {
        nextExchangeID += 1
        let exchange = HTTPExchange(id: nextExchangeID, wsi: request.wsi, request: adminRequest,
                                    startedAt: MonotonicClock.nanoseconds())
        exchanges[exchange.id] = exchange
        exchangeByWsi[request.wsi] = exchange.id
        return exchange
    }

    private func submit(_ exchange: HTTPExchange, unavailable: HTTPResponse? = nil,
                        _ job: @escaping @Sendable (PGConnection) throws -> HTTPResponse) {
        let id = exchange.id
        let mailbox = self.mailbox
        adminWorker.submit({ db in
            mailbox.post(.adminDone(id, try job(db)))
        }, failed: { error in
            let isUnavailable = (error as? StoreError)?.kind == .unavailable
            mailbox.post(.adminDone(id, isUnavailable
                ? unavailable ?? .error(503, "store_unavailable", "database unreachable; retry shortly", headers: [("Retry-After", "1")])
                : .error(500, "internal_error", "\(error)")))
        })
    }

    /// A worker's answer arrived (service thread): write it when the socket is writeable.
    func adminDone(_ id: UInt64, _ response: HTTPResponse) {
        guard let exchange = exchanges[id] else { return }  // the client went away
        finish(exchange, response)
    }

    private func finish(_ exchange: HTTPExchange, _ response: HTTPResponse) {
        guard exchange.response == nil else { return }
        exchange.response = response
        if let gate {
            logRequest(HTTPRequest(wsi: exchange.wsi, head: HTTPRequestHead(method: exchange.request.method, path: exchange.request.path)),
                       status: response.status, startedAt: exchange.startedAt)
            forgetExchange(exchange.wsi)
            gate.respond(exchange.wsi, with: response)
        } else {
            lws_callback_on_writable(exchange.wsi)
        }
    }

    /// `LWS_CALLBACK_HTTP_WRITEABLE`: sends a finished admin response.
    func adminWriteable(_ wsi: OpaquePointer) -> Int32 {
        guard let id = exchangeByWsi[wsi], let exchange = exchanges[id], let response = exchange.response else { return 0 }
        forgetExchange(wsi)
        let connection = HTTPRequest(wsi: wsi, head: HTTPRequestHead(method: exchange.request.method, path: exchange.request.path))
        logRequest(connection, status: response.status, startedAt: exchange.startedAt)
        guard connection.send(response) else { return -1 }
        return lws_http_transaction_completed(wsi) != 0 ? -1 : 0
    }

    /// `LWS_CALLBACK_CLOSED_HTTP` (or a finished exchange).
    func forgetExchange(_ wsi: OpaquePointer) {
        if let id = exchangeByWsi.removeValue(forKey: wsi) { exchanges[id] = nil }
        robotExchanges.cancel(client: RobotHTTPClient(wsi: wsi, method: "", path: ""))
    }
}
