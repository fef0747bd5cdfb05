import RelayCore
import RelayCrypto
import RelayWorkers

/// What the front door's wait for a token's lookup came to (`Authenticator.awaitCredential`).
enum CredentialWait {
    /// No token, or one in memory: go on now.
    case ready
    /// Its lookup is under way: the request waits, unread, until `resume`.
    case waiting
    /// Not looked up: answer this (429 for a failing address, 503 past the bound).
    case refused(RelayError)
}

/// Who is calling: the one place bearer tokens, the admin token and the client's address are
/// read and checked, for HTTP routes and WebSocket upgrades alike. Owns the token cache, the
/// lookups of tokens it does not hold, and the per-address failure limit. Service thread only.
final class Authenticator {
    let credentials: CredentialCache
    let lookups: CredentialLookups
    let failures: AuthFailureLimiter
    private let configuration: RelayConfiguration
    private let clock: RelayClock

    init(configuration: RelayConfiguration, clock: RelayClock, lookups queue: CredentialQueue) {
        self.configuration = configuration
        self.clock = clock
        credentials = CredentialCache(capacity: configuration.credentialCacheSize)
        lookups = CredentialLookups(queue: queue, clock: clock, holdSeconds: configuration.credentialHoldSeconds)
        failures = AuthFailureLimiter(rate: configuration.authFailureRate, burst: configuration.authFailureBurst)
    }

    /// The token `head` presents, read and hashed: the front door's one reading of it, which
    /// travels with the head (`HTTPRequestHead.credential`) to every check after.
    func presentedCredential(in head: HTTPRequestHead) -> PresentedCredential? {
        PresentedCredential.token(presentedIn: head).map { PresentedCredential(token: $0, digest: BearerToken.digest($0)) }
    }

    /// The credential `request` presents: the one its head carries from the front door, or read
    /// now (TLS served by lws, where no gate reads heads).
    func credential(of request: HTTPRequest) -> PresentedCredential? {
        request.head.credential ?? presentedCredential(in: request.head)
    }

    /// Before a request or upgrade is read further: when its credential (`head.credential`) is not
    /// held, the token is read from the store and `resume` is called once it is in (or the hold
    /// passed). The failure limit is consulted first: an address over it shares a small number of
    /// waiting places (`CredentialLookups.failingShare`; past them 429 at once), so its guesses
    /// cannot drive the store, while a good token from it is still read. Past the bound on waiting
    /// requests: 503. `peer` is asked only for a token not held.
    func awaitCredential(for head: HTTPRequestHead, peer: () -> String, then resume: @escaping () -> Void) -> CredentialWait {
        guard let credential = head.credential, case .notHeld = credentials.lookup(digest: credential.digest) else { return .ready }
        let failing = failures.isBlocked(clientAddress(head, peer: peer()), now: clock.monotonic())
        switch lookups.wait(for: credential.digest, failingAddress: failing, then: resume) {
        case .waiting: return .waiting
        case .failingShareFull: return .refused(.authentication(.rateLimited, Authenticator.tooManyFailures))
        case .full: return .refused(.authentication(.storeUnavailable, "too many tokens are being read from the store; retry shortly"))
        }
    }

    /// Forgets addresses whose failures have drained (the 1 s tick).
    func sweep(now: UInt64) { failures.sweep(now: now) }

    /// The bearer token of an HTTP request (`Authorization: Bearer …` only, as the contract says).
    private func bearerToken(_ request: HTTPRequest) -> String? {
        request.head.header("authorization").flatMap(Redaction.bearerToken(fromAuthorization:))
    }

    /// A presented credential (nil: none) against the cache and the credential rules.
    func check(_ credential: PresentedCredential?, wants: String) -> Result<CredentialEntry, RelayError> {
        guard let credential else { return .failure(RelayError(.missingToken, wants)) }
        let digest = credential.digest
        let entry: CredentialEntry
        switch credentials.lookup(digest: digest) {
        case .found(let found): entry = found
        case .unknown: return .failure(RelayError(.unknownToken, "unknown token"))
        case .notHeld:
            // Waited for and still not read (the store unreachable), or a caller that cannot wait
            // (TLS served by lws): read it for the retry.
            lookups.prefetch(digest)
            return .failure(RelayError(.storeUnavailable, "credential store unavailable; retry shortly"))
        }
        if case .failure(let failure) = CredentialRules.check(entry, at: clock.wall()) {
            return .failure(RelayError(failure, Authenticator.wording[failure] ?? failure.rawValue))
        }
        return .success(entry)
    }

    /// `check(_:wants:)`, then the token must be `role`'s (either role's when nil) for `device`.
    func check(_ credential: PresentedCredential?, device: DeviceID, role: Role?, wants: String,
               messages: [AuthFailure: String] = [:]) -> Result<CredentialEntry, RelayError> {
        let entry: CredentialEntry
        switch check(credential, wants: wants) {
        case .failure(let refusal): return .failure(refusal)
        case .success(let found): entry = found
        }
        if case .failure(let failure) = CredentialRules.authorize(entry, device: device, role: role ?? entry.token.role,
                                                                  at: clock.wall()) {
            return .failure(RelayError(failure, messages[failure] ?? Authenticator.wording[failure] ?? failure.rawValue))
        }
        return .success(entry)
    }

    static let tooManyFailures = "too many failed authentications from this address; retry later"

    /// One wording per failure, for every entrance.
    static let wording: [AuthFailure: String] = [
        .expiredToken: "token expired", .revokedToken: "token revoked", .deviceDisabled: "device disabled",
        .wrongDevice: "token belongs to another device", .wrongRole: "token is for another role",
    ]

    /// The answer to a refused credential from `address`, counted toward its failure limit:
    /// the failure's own status, or 429 once the address has failed too often (only failing
    /// attempts are slowed: a good credential is never asked about the limit). An unavailable
    /// store is nobody's failure and is not counted.
    func refused(_ refusal: RelayError, address: String) -> RelayError {
        let limited = limitFailure(refusal, address: address)
        return .authentication(limited.code, limited.message)
    }

    /// `refusal`, or the failure limit's 429 instead; counts the failure. A request that
    /// presented no credential guesses nothing: it is neither counted nor slowed.
    private func limitFailure(_ refusal: RelayError, address: String) -> RelayError {
        guard ![.storeUnavailable, .rateLimited, .missingToken].contains(refusal.code) else { return refusal }
        let now = clock.monotonic()
        if failures.isBlocked(address, now: now) {
            return RelayError(.rateLimited, Authenticator.tooManyFailures)
        }
        failures.recordFailure(address, now: now)
        return refusal
    }

    /// The admin API answers 404 while it is disabled and 401 without its token, before it
    /// says which of its paths and methods exist; wrong tokens count toward the address's
    /// failure limit like any other. Nil: the token is good.
    func adminRefusal(_ request: HTTPRequest) -> RelayError? {
        guard let adminToken = configuration.adminToken else {
            return RelayError(.notFound, "the admin API is disabled (set WIMZ_ADMIN_TOKEN)")
        }
        // (The admin API answers `unknown_token` with or without a token, as it always has.)
        guard let presented = bearerToken(request) else { return .authentication(.unknownToken, "admin token required") }
        // Hash both sides so the comparison's time depends on neither length nor content.
        guard Crypto.constantTimeEquals(Crypto.sha256(presented), Crypto.sha256(adminToken)) else {
            return refused(RelayError(.unknownToken, "admin token required"), address: clientAddress(request))
        }
        return nil
    }

    /// The client's address: the peer, or — only when the peer is a trusted proxy — the
    /// right-most `X-Forwarded-For` entry that is not itself a trusted proxy.
    func clientAddress(_ request: HTTPRequest) -> String { clientAddress(request.head, peer: request.peerAddress) }

    private func clientAddress(_ head: HTTPRequestHead, peer: String) -> String {
        guard configuration.trustedProxies.contains(peer),
              let forwarded = head.header("x-forwarded-for"), forwarded.utf8.count <= 1024 else { return peer }
        let hops = forwarded.split(separator: ",").map { String($0.filter { $0 != " " }) }
        for hop in hops.reversed() where !hop.isEmpty && !configuration.trustedProxies.contains(hop) {
            // Only something that looks like an address: it ends up in logs and the audit log.
            guard hop.count <= 45, hop.allSatisfy({ $0.isHexDigit || $0 == "." || $0 == ":" }) else { return peer }
            return hop
        }
        return peer
    }
}

extension Authenticator: MetricsReporting {
    func report(to metrics: MetricsSink) {
        metrics.gauge("wimz_credentials_cached", "Tokens this relay holds in memory (its clients' and recent ones).", credentials.count)
        metrics.gauge("wimz_credential_lookups_waiting",
                      "Requests and upgrades waiting for their token to be read from the store; past "
                      + "wimz_credential_lookups_waiting_capacity of them a request is refused (503).", lookups.waitingRequests)
        metrics.gauge("wimz_credential_lookups_waiting_capacity", "The most requests and upgrades that may wait for their tokens' lookups at once.",
                      lookups.capacity)
        metrics.gauge("wimz_credential_lookups_in_flight", "Tokens being read from the store now (one lookup serves every request waiting for it).",
                      lookups.tokensBeingRead)
        metrics.counter("wimz_credential_lookups_total", "Presented tokens read from the store (one statement serves many).",
                        lookups.asked)
        let refusedHelp = "Requests and upgrades refused rather than made to wait for their token's lookup: 503 past the bound "
            + "on waiting requests (full), 429 past the share of addresses over their failure limit (failing_address)."
        metrics.counter("wimz_credential_lookups_refused_total", refusedHelp, [("reason", "full")], lookups.refusedFull)
        metrics.counter("wimz_credential_lookups_refused_total", refusedHelp, [("reason", "failing_address")], lookups.refusedFailingAddress)
        metrics.counter("wimz_credential_lookups_timed_out_total",
                        "Waits for a token's lookup that ended at WIMZ_CREDENTIAL_HOLD without an answer (answered 503).",
                        lookups.timedOut)
    }
}
