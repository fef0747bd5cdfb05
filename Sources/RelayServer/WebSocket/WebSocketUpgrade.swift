import CLibWebSockets
import RelayCore
import WimzProtocol

/// An upgrade that passed every check: who it is.
struct UpgradeGrant {
    var role: Role
    var device: DeviceID
    var entry: CredentialEntry
    var remoteAddress: String
    /// An app's `recover=1`/`since=E:N` (docs/protocol.md v1.1 "Recovering missed events").
    var recovery: RecoveryRequest?
    /// A robot's `senders=1` (docs/protocol.md v1.3 "Who is speaking").
    var wantsSenders = false
}

/// The WebSocket upgrade, before the 101 (docs/protocol.md "The two sockets"): path, device id,
/// token and its rules, the failure limit, the app cap, and a robot's `senders=1`.
extension WebSocketEndpoint {
    /// `LWS_CALLBACK_SERVER_NEW_CLIENT_INSTANTIATED`: the handshake clock starts.
    func accepted(_ wsi: OpaquePointer) { acceptedAt[wsi] = env.clock.monotonic() }

    /// `LWS_CALLBACK_CLOSED_HTTP`: a connection that never became a WebSocket.
    func forget(_ wsi: OpaquePointer) { acceptedAt[wsi] = nil }

    /// Checks an upgrade request (docs/protocol.md "The two sockets"): path, device id, token,
    /// credential rules, per-address failure limit, app cap. Returns the grant or the response.
    func authorizeUpgrade(_ request: HTTPRequest) -> Result<UpgradeGrant, UpgradeRejection> {
        let address = authenticator.clientAddress(request)
        let role: Role
        switch request.head.path {
        case WimzProtocol.Path.robotSocket: role = .robot
        case WimzProtocol.Path.appSocket: role = .app
        default:
            return .failure(UpgradeRejection(error: RelayError(.notFound, "no such WebSocket endpoint"),
                                             isAuthFailure: false, device: nil, address: address))
        }
        let deviceText: String?
        let recovery: RecoveryRequest?
        let senders: String?
        do throws(RelayError) {
            deviceText = try request.head.argument("device_id")
            _ = try request.head.argument("token")  // given twice: 400, whichever a component would pick
            recovery = role == .app ? try RecoveryRequest.parse(recover: request.head.argument("recover"),
                                                                 since: request.head.argument("since")) : nil
            senders = role == .robot ? try request.head.argument("senders") : nil
            if let senders, senders != "1", senders != "0" { throw RelayError(.badRequest, "senders must be 1 or 0") }
        } catch {
            return .failure(UpgradeRejection(error: error, isAuthFailure: true, device: nil, address: address))
        }
        guard let deviceText, let device = DeviceID(deviceText) else {
            return .failure(UpgradeRejection(
                error: RelayError(.badRequest, "device_id is missing or not [A-Za-z0-9_.-]{1,64}"),
                isAuthFailure: true, device: nil, address: address))
        }
        let entry: CredentialEntry
        switch authenticator.check(authenticator.credential(of: request), device: device, role: role,
                                   wants: "a token is required (Authorization: Bearer or token= query argument)") {
        case .success(let found): entry = found
        case .failure(let refusal):
            let limited = authenticator.refused(refusal, address: address)
            return .failure(UpgradeRejection(error: limited, isAuthFailure: true, device: device, address: address))
        }
        if role == .app, !hub.hasRoomForApp(device) {
            return .failure(UpgradeRejection(
                error: RelayError(.tooManyConnections,
                                  "this device already has \(env.configuration.maxAppsPerDevice) app connections",
                                  headers: [("Retry-After", "1")]),
                isAuthFailure: false, device: device, address: address))
        }
        return .success(UpgradeGrant(role: role, device: device, entry: entry, remoteAddress: address, recovery: recovery,
                                     wantsSenders: senders == "1"))
    }

    /// Handles `LWS_CALLBACK_HTTP_CONFIRM_UPGRADE`: 0 to proceed, 1 when a rejection was sent,
    /// -1 to drop the connection.
    func confirmUpgrade(_ wsi: OpaquePointer) -> Int32 {
        defer { heads.forget(wsi) }
        let refusal: HTTPResponse?
        switch heads.head(of: wsi) {
        case .success(let head): refusal = confirmUpgrade(LWSHTTP.request(wsi, head: head), on: wsi)
        case .failure(let error): refusal = .error(error)
        }
        guard let refusal else { return 0 }
        return LWSHTTP.send(refusal, on: wsi, asHTTP11: true) ? 1 : -1
    }

    /// The decision on an upgrade request arriving on `socket`: nil to go on (its grant waits
    /// for the ESTABLISHED that follows), or the refusal to send (logged, and audited when a
    /// credential failed).
    func confirmUpgrade(_ request: HTTPRequest, on socket: OpaquePointer) -> HTTPResponse? {
        let started = env.clock.monotonic()
        if stop.stopping {
            env.logRequest(request, status: 503, startedAt: started)
            return .error(.shuttingDown, "the relay is shutting down", headers: [("Retry-After", "1")])
        }
        switch authorizeUpgrade(request) {
        case .success(let grant):
            pendingGrant = (socket, grant)
            return nil
        case .failure(let rejection):
            if rejection.isAuthFailure { recordAuthFailure(rejection) }
            env.logRequest(request, status: rejection.error.status, startedAt: started)
            return .error(rejection.error)
        }
    }

    /// Counted, and audited unless it is the failure limit's 429 (each of those would be one
    /// more row for a flooding client; the failures that led to it were audited).
    private func recordAuthFailure(_ rejection: UpgradeRejection) {
        let failure = rejection.error.code
        env.counters.authFailures[failure, default: 0] += 1
        guard failure != .rateLimited else { return }
        env.audit.record(.authFailed, device: rejection.device?.rawValue, tokenID: nil, address: rejection.address,
              details: [("reason", .string(failure.rawValue))])
    }
}

/// A refused upgrade: the refusal to answer and what to record.
struct UpgradeRejection: Error {
    var error: RelayError
    /// A failed authentication (a malformed request or a refused credential): counted and audited.
    var isAuthFailure: Bool
    var device: DeviceID?
    var address: String
}
