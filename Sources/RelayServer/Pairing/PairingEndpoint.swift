import RelayCore
import RelayStore

/// Pairing (docs/protocol.md v1.1 "Pairing a phone"): a robot mints a code, an app redeems it for an app
/// token, the robot lists and revokes its app tokens. The token checks run on the service thread
/// (the token cache); the database work on the database worker.
///
///     POST   /api/devices/{id}/pairing-codes        robot token → 201 {"code","expires_at","expires_in"}
///     POST   /api/pairing  {"code":C,"label":L}     no token    → 201 {"device_id","token","token_id","access","control","until"}
///                                                   (a robot's code makes an owner; an owner's invite (v1.3) what it grants)
///     GET    /api/devices/{id}/app-tokens           robot token → 200 {"tokens":[…]}
///     DELETE /api/devices/{id}/app-tokens/{tid}     robot token → 200 the revoked token
final class PairingEndpoint {
    private let env: RelayEnvironment
    private let authenticator: Authenticator
    private let database: DatabaseExchanges
    private let mailbox: Mailbox<ServiceEvent>
    /// Per robot token: pairing calls (mint a code, list and revoke app tokens).
    private var limiter = KeyedRateLimiter<Int64>(rate: 2, burst: 10)
    /// Addresses (by `AddressKey`) the database found over the failure limit, until when: their
    /// attempts are refused here, with no transaction and no audit row each (the database wrote
    /// one when it refused the first).
    private var refusedUntil = LRUTable<String, UInt64>(capacity: 10_000)
    /// How long an address stays refused: the database's failure window.
    static let refusalWindow: UInt64 = 60_000_000_000

    init(env: RelayEnvironment, authenticator: Authenticator, database: DatabaseExchanges, mailbox: Mailbox<ServiceEvent>) {
        self.env = env
        self.authenticator = authenticator
        self.database = database
        self.mailbox = mailbox
    }

    /// Forgets idle limiters (the 1 s tick).
    func sweep(now: UInt64) {
        limiter.sweep(now: now)
        refusedUntil.removeOldest { $0 <= now }
    }

    /// Runs `body` for the device's robot token (the router checked it); 429 past the per-token
    /// rate of these calls.
    private func withRobot(_ entry: CredentialEntry, _ body: () -> HTTPResponse?) -> HTTPResponse? {
        guard limiter.allow(entry.token.id, now: env.clock.monotonic()) else {
            return .error(.authentication(.rateLimited, "too many pairing calls for this token"))
        }
        return body()
    }

    /// `POST /api/devices/{id}/pairing-codes` (robot token).
    func mintPairingCode(_ request: HTTPRequest, entry: CredentialEntry) -> HTTPResponse? {
        withRobot(entry) { mintCode(request, entry: entry) }
    }

    /// `GET /api/devices/{id}/app-tokens` (robot token).
    func listAppTokens(_ request: HTTPRequest, entry: CredentialEntry) -> HTTPResponse? {
        withRobot(entry) { appTokens(request, entry: entry) }
    }

    /// `DELETE /api/devices/{id}/app-tokens/{token_id}` (robot token).
    func revokeAppToken(_ request: HTTPRequest, entry: CredentialEntry, tokenText: String) -> HTTPResponse? {
        guard let tokenID = Int64(tokenText), tokenID > 0 else {
            return .error(.badRequest, "token id must be a positive number")
        }
        return withRobot(entry) { revoke(request, entry: entry, tokenID: tokenID) }
    }

    private func mintCode(_ request: HTTPRequest, entry: CredentialEntry) -> HTTPResponse? {
        let ttl = env.configuration.pairingCodeSeconds
        let address = authenticator.clientAddress(request)
        return database.answer(request) { db in
            let minted = try PairingRepository(db).create(device: entry.token.deviceID, ttl: ttl, actor: "robot", address: address)
            return .json(201, .object([("code", .string(minted.code)), ("expires_at", .string(minted.expiresAt.iso8601)),
                                       ("expires_in", .int(Int64(minted.expiresIn)))]))
        }
    }

    /// `POST /api/pairing` (no token).
    func redeemPairingCode(_ request: HTTPRequest, body: [UInt8]) -> HTTPResponse? {
        guard let json = try? JSONReader.parse(body), let code = json.member("code")?.stringValue else {
            return .error(.badRequest, #"send {"code":"…","label":"…"} as JSON"#)
        }
        let label = json.member("label")?.stringValue ?? ""
        guard label.count <= 128, !label.unicodeScalars.contains(where: { $0.value < 0x20 || $0.value == 0x7F }) else {
            return .error(.badRequest, "label: at most 128 characters, no control characters")
        }
        let address = authenticator.clientAddress(request)
        let key = AddressKey.of(address)
        let now = env.clock.monotonic()
        if let until = refusedUntil.peek(key), until > now {
            env.counters.pairingRefusedInMemory += 1
            return PairingEndpoint.tooManyFailures
        }
        let mailbox = self.mailbox
        let onAnswer: (HTTPResponse) -> Void = { [weak self] response in
            guard response.status == 429, let self else { return }
            refusedUntil.set(key, env.clock.monotonic() + PairingEndpoint.refusalWindow)
        }
        return database.answer(request, onAnswer: onAnswer) { db in
            switch try PairingRepository(db).redeem(code, label: label, address: address) {
            case .paired(let device, let issued):
                // The new token works on this node at once (ahead of its NOTIFY): the mailbox
                // delivers this before the answer.
                if let credential = issued.record.credential {
                    mailbox.post(.store(.tokenChanged(id: issued.record.id, entry: CredentialEntry(token: credential, deviceDisabled: false))))
                }
                let token = issued.record
                return .json(201, .object([("device_id", .string(device.rawValue)), ("token", .string(issued.secret)),
                                           ("token_id", .int(token.id))] + token.rights.fields(until: token.until)))
            case .invalid:
                return .error(.invalidCode, "no such pairing code, or it was used or has expired")
            case .rateLimited:
                return PairingEndpoint.tooManyFailures
            }
        }
    }

    static let tooManyFailures = HTTPResponse.error(.rateLimited, "too many failed pairing attempts from this address; retry in a minute",
                                                    headers: [("Retry-After", "60")])

    private func appTokens(_ request: HTTPRequest, entry: CredentialEntry) -> HTTPResponse? {
        let device = entry.token.deviceID
        return database.answer(request) { db in
            let tokens = try TokenRepository(db).list(device: device).filter { $0.role == .app }
            return .json(200, .object([("tokens", .array(tokens.map(PairingEndpoint.appTokenJSON)))]))
        }
    }

    private func revoke(_ request: HTTPRequest, entry: CredentialEntry, tokenID: Int64) -> HTTPResponse? {
        let device = entry.token.deviceID, mailbox = self.mailbox
        return database.answer(request) { db in
            guard try TokenRepository(db).list(device: device).contains(where: { $0.id == tokenID && $0.role == .app })
            else { return .error(.notFound, "no app token \(tokenID) on this device") }
            // Revoking fires the tokens NOTIFY: every node closes the token's sockets (4003) within a second.
            let revoked = try TokenRepository(db).revoke(id: tokenID, actor: "robot").token
            try mailbox.postTokensChanged([tokenID], readOn: db)
            return .json(200, PairingEndpoint.appTokenJSON(revoked))
        }
    }

    /// An app token as the robot sees it (never its secret).
    static func appTokenJSON(_ token: TokenRecord) -> JSONValue {
        .object([("id", .int(token.id)), ("label", .string(token.label)), ("created_at", .string(token.createdAt.iso8601)),
                 ("last_used_at", .optional(token.lastUsedAt?.iso8601)), ("expires_at", .optional(token.expiresAt?.iso8601)),
                 ("revoked_at", .optional(token.revokedAt?.iso8601))] + token.rights.fields(until: token.until))
    }
}
