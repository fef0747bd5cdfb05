import RelayCore
import RelayCrypto
import RelayStore

/// The sealed household's keys and epochs (docs/protocol.md "The sealed household (v1.5)"):
///
///     GET /api/devices/{id}/sealed                   robot or app → 200 {"sealed","epoch"}
///     PUT /api/devices/{id}/sealed/member-key        app    {"sign":B64,"hpke":B64} → 200 {"kid"}
///     GET /api/devices/{id}/sealed/members           app    → 200 {"members":[{"kid","sign","hpke","token_id","label","access","control","until"}],"departed":[kid],
///                                                              "signed_in":[{"kid","token_id","access","control","until"}]}
///     PUT /api/devices/{id}/sealed/epochs/{E}        robot  {"roster":{…},"robot_sig","packages":[…]} → 201 {"epoch"} (409: not current + 1)
///     GET /api/devices/{id}/sealed/epochs/current    app    → 200 {"epoch","roster","robot_sig","package"} (404 not_in_roster)
///     GET /api/devices/{id}/sealed/epochs/{E}        app    the same for an earlier epoch
///     POST /api/devices/{id}/sealed/rosters          owner  {"roster":B64,"by":KID,"sig":B64,"departures"?:[…]} → 202 {"epoch"} (409: not current + 1)
///     GET /api/devices/{id}/sealed/rosters           robot  → 200 {"rosters":[…]} signed, above the current epoch
///     PUT /api/devices/{id}/sealed/history/{kid}     owner  {"grant":B64,"by":KID,"sig":B64} → 200 {"kid","epochs"} (v1.6)
///
/// Choices where the contract is silent: `GET …/sealed` is ours, so that either end learns whether
/// the device is sealed (and so never falls back to an unsealed frame); `members` lists live
/// members' keys not yet in the current roster with what an owner's app needs to sign them in
/// (their token's access, control, until and label); a device with no epoch answers 404
/// `not_found` ("not sealed"); a roster is accepted for the robot with 202; a history grant is
/// stored with 200 and its kid and epochs; rate-limited per token as the household's calls are.
final class SealedEndpoint {
    private let env: RelayEnvironment
    private let authenticator: Authenticator
    private let database: DatabaseExchanges
    private let mailbox: Mailbox<ServiceEvent>
    /// Per token: sealed-household calls.
    private var limiter = KeyedRateLimiter<Int64>(rate: 5, burst: 60)

    init(env: RelayEnvironment, authenticator: Authenticator, database: DatabaseExchanges, mailbox: Mailbox<ServiceEvent>) {
        self.env = env
        self.authenticator = authenticator
        self.database = database
        self.mailbox = mailbox
    }

    /// Forgets idle limiters (the 1 s tick).
    func sweep(now: UInt64) { limiter.sweep(now: now) }

    /// `epoch` and `kid`: the path's, where it has one.
    func handle(_ request: HTTPRequest, _ call: Route.Sealed, entry: CredentialEntry, epoch: String?, kid: String?, body: [UInt8]?) -> HTTPResponse? {
        guard limiter.allow(entry.token.id, now: env.clock.monotonic()) else {
            return .error(.authentication(.rateLimited, "too many sealed-household calls for this token"))
        }
        let device = entry.token.deviceID, token = entry.token.id
        let address = authenticator.clientAddress(request)
        do throws(RelayError) {
            switch call {
            case .status:
                return database.answer(request) { db in
                    let epoch = try SealedRepository(db).currentEpoch(device: device)
                    return .json(200, .object([("sealed", .bool(epoch != nil)), ("epoch", epoch.map { .int(Int64($0)) } ?? .null)]))
                }
            case .putMemberKey:
                guard let body else { return .error(.notSupported, "member keys need the relay's own HTTP front") }
                let key = try SealedRules.memberKey(body, appTokenID: token, sha256: Crypto.sha256)
                return database.answer(request) { db in
                    try SealedRepository(db).setMemberKey(device: device, key, address: address)
                    return .json(200, .object([("kid", .string(key.kid))]))
                }
            case .listMembers:
                return database.answer(request) { db in
                    let repository = SealedRepository(db)
                    let pending = try repository.pendingMembers(device: device)
                    return .json(200, .object([("members", .array(pending.map { key, member in
                        .object([("kid", .string(key.kid)), ("sign", .string(key.sign)), ("hpke", .string(key.hpke))]
                                + member.memberFields(labelled: true))
                    })), ("departed", .array(try repository.departedMembers(device: device).map { .string($0) })),
                    ("signed_in", .array(try repository.signedInMembers(device: device).map { key, member in
                        .object([("kid", .string(key.kid))] + member.memberFields(labelled: false))
                    }))]))
                }
            case .putEpoch:
                guard let body else { return .error(.notSupported, "epochs need the relay's own HTTP front") }
                let upload = try SealedRules.epochUpload(body, device: device, epoch: try Self.epochNumber(epoch))
                let mailbox = self.mailbox
                return database.answer(request) { db in
                    // The members this epoch drops are refused here from the next request on.
                    try mailbox.postTokensChanged(try SealedRepository(db).addEpoch(device: device, upload, address: address), readOn: db)
                    return .json(201, .object([("epoch", .int(Int64(upload.epoch)))]))
                }
            case .proposeRoster:
                guard let body else { return .error(.notSupported, "rosters need the relay's own HTTP front") }
                let proposal = try SealedRules.proposal(body, device: device)
                return database.answer(request) { db in
                    try SealedRepository(db).proposeRoster(device: device, epoch: proposal.epoch, signed: proposal.json, by: token, address: address)
                    return .json(202, .object([("epoch", .int(Int64(proposal.epoch)))]))
                }
            case .pendingRosters:
                return database.answer(request) { db in
                    let pending = try SealedRepository(db).pendingRosters(device: device)
                    return .json(200, .object([("rosters", .array(pending.map { .raw($0) }))]))
                }
            case .putHistory:
                guard let body else { return .error(.notSupported, "history grants need the relay's own HTTP front") }
                let kid = kid ?? ""
                let grant = try SealedRules.historyGrant(body, device: device, kid: kid)
                return database.answer(request) { db in
                    try SealedRepository(db).putHistoryGrant(device: device, kid: kid, grant, by: token, address: address) { signKey in
                        Base64.decodeURLSafe(signKey).map { Ed25519.verifies(signature: Base64.decodeURLSafe(grant.signed.signature) ?? [],
                                                                             of: grant.bytes, publicKey: $0) } ?? false
                    }
                    return .json(200, .object([("kid", .string(kid)), ("epochs", .array(grant.epochs.map { .int(Int64($0)) }))]))
                }
            case .getEpoch:
                let number = epoch == "current" ? nil : try Self.epochNumber(epoch)
                return database.answer(request) { db in
                    switch try SealedRepository(db).epoch(device: device, number, appTokenID: token) {
                    case .noEpoch:
                        return .error(.notFound, number == nil ? "this device is not sealed" : "no such epoch on this device")
                    case .notInRoster:
                        return .error(.notInRoster, "this app's key has no package in that epoch: an owner signs it in first")
                    case .found(let found):
                        return .json(200, .object([
                            ("epoch", .int(Int64(found.epoch))),
                            ("roster", .object([("roster", .string(found.roster)), ("by", .string(found.signedBy)),
                                                ("sig", .string(found.signature))])),
                            ("robot_sig", .string(found.robotSignature)),
                            ("package", .object([("kid", .string(found.package.kid)), ("sealed", .string(found.package.sealed))])),
                        ] + (found.history.map { [("history", $0.json)] } ?? [])))
                    }
                }
            }
        } catch {
            return .error(error)
        }
    }

    /// An epoch in a path: 1 to 2^31 − 1, digits only.
    private static func epochNumber(_ text: String?) throws(RelayError) -> Int {
        guard let text, text.utf8.count <= 10, text.utf8.allSatisfy({ (48...57).contains($0) }), let number = Int32(text), number >= 1 else {
            throw RelayError(.badRequest, "an epoch is a whole number from 1")
        }
        return Int(number)
    }
}
