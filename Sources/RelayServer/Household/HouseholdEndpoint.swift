import RelayCore
import RelayStore

/// The household (docs/protocol.md v1.3 "Invitations", "Members"), for app tokens of the device; the
/// router checked the caller's access level against the route (owner, or owner-or-family):
///
///     POST   /api/devices/{id}/invites             owner  → 201 {"invite_id","code","expires_at","access","control","until"}
///     GET    /api/devices/{id}/invites             owner  → 200 {"invites":[…]}   (pending; never the code)
///     DELETE /api/devices/{id}/invites/{iid}       owner  → 204
///     GET    /api/devices/{id}/members             owner or family → 200 {"members":[…]}
///     PATCH  /api/devices/{id}/members/{tid}       owner  → 200 the member as listed
///     DELETE /api/devices/{id}/members/{tid}       owner, or the member itself → 204
///
/// Bodies are read strictly (`HouseholdRules`); the store re-checks, in the same transaction
/// as the change, that the calling owner still is one (a token downgraded on another node a
/// moment ago acts no more). A change is applied to this node's token cache as soon as it is
/// committed (ahead of the NOTIFY every node acts on), so the member's live sockets here see it
/// on their next frame.
final class HouseholdEndpoint {
    private let env: RelayEnvironment
    private let hub: DeviceHub
    private let authenticator: Authenticator
    private let database: DatabaseExchanges
    private let mailbox: Mailbox<ServiceEvent>
    /// Per app token: household calls.
    private var limiter = KeyedRateLimiter<Int64>(rate: 5, burst: 60)

    init(env: RelayEnvironment, hub: DeviceHub, authenticator: Authenticator, database: DatabaseExchanges, mailbox: Mailbox<ServiceEvent>) {
        self.env = env
        self.hub = hub
        self.authenticator = authenticator
        self.database = database
        self.mailbox = mailbox
    }

    /// Forgets idle limiters (the 1 s tick).
    func sweep(now: UInt64) { limiter.sweep(now: now) }

    /// The route's answer: 429 past the per-token rate of these calls, else `body`.
    func handle(_ request: HTTPRequest, _ call: Route.Household, entry: CredentialEntry, parameters: [String: String],
                body: [UInt8]?) -> HTTPResponse? {
        guard limiter.allow(entry.token.id, now: env.clock.monotonic()) else {
            return .error(.authentication(.rateLimited, "too many household calls for this token"))
        }
        let device = entry.token.deviceID
        let owner = HouseholdActor.owner(tokenID: entry.token.id)
        let address = authenticator.clientAddress(request)
        switch call {
        case .createInvite:
            guard let body else { return .error(.notSupported, "invites need the relay's own HTTP front") }
            let invite: HouseholdRules.Invite
            do throws(RelayError) {
                invite = try HouseholdRules.invite(body, now: env.clock.wall())
            } catch {
                return .error(error)
            }
            return database.answer(request) { db in
                let (record, code) = try HouseholdRepository(db).createInvite(device: device, invite, by: owner, address: address)
                return .json(201, .object([("invite_id", .int(record.id)), ("code", .string(code)),
                                           ("expires_at", .string(record.expiresAt.iso8601))] + record.rights.fields(until: record.until)))
            }
        case .listInvites:
            return database.answer(request) { db in
                .json(200, .object([("invites", .array(try HouseholdRepository(db).pendingInvites(device: device)
                                                           .map(HouseholdEndpoint.inviteJSON)))]))
            }
        case .cancelInvite:
            guard let id = Self.positiveID(parameters["invite_id"]) else { return .error(.notFound, "no such invite") }
            return database.answer(request) { db in
                try HouseholdRepository(db).cancelInvite(device: device, id: id, by: owner, address: address)
                    ? .noContent : .error(.notFound, "no pending invite \(id) on this device")
            }
        case .listMembers:
            let online = Set(hub.apps(of: device).map(\.tokenID))
            return database.answer(request) { db in
                .json(200, .object([("members", .array(try HouseholdRepository(db).members(device: device)
                                                           .map { HouseholdEndpoint.memberJSON($0, online: online.contains($0.id)) }))]))
            }
        case .updateMember:
            guard let body else { return .error(.notSupported, "member changes need the relay's own HTTP front") }
            guard let id = Self.positiveID(parameters["token_id"]) else { return .error(.notFound, "no such member") }
            let change: HouseholdRules.MemberChange
            do throws(RelayError) {
                change = try HouseholdRules.memberChange(body)
            } catch {
                return .error(error)
            }
            let online = hub.apps(of: device).contains { $0.tokenID == id }
            let mailbox = self.mailbox
            return database.answer(request) { db in
                let updated = try HouseholdRepository(db).updateMember(device: device, tokenID: id, change, by: owner, address: address)
                try mailbox.postTokensChanged([id], readOn: db)
                return .json(200, HouseholdEndpoint.memberJSON(updated, online: online))
            }
        case .removeMember:
            guard let id = Self.positiveID(parameters["token_id"]) else { return .error(.notFound, "no such member") }
            let rights = entry.token.rights
            // Owners remove anyone; anybody may leave.
            guard rights.mayManageHousehold || id == entry.token.id else {
                return .error(.forbidden, "only an owner removes other members; DELETE your own token_id to leave")
            }
            let actor: HouseholdActor = id == entry.token.id ? .member(tokenID: id) : owner
            let mailbox = self.mailbox
            return database.answer(request) { db in
                try HouseholdRepository(db).removeMember(device: device, tokenID: id, by: actor, address: address)
                try mailbox.postTokensChanged([id], readOn: db)
                return .noContent
            }
        }
    }

    /// The database job's answer; a refusal in the contract's terms becomes its error body.
    private static func positiveID(_ text: String?) -> Int64? {
        guard let text, text.count <= 19, let id = Int64(text), id > 0 else { return nil }
        return id
    }

    /// A pending invite as listed.
    static func inviteJSON(_ invite: InviteRecord) -> JSONValue {
        .object(invite.fields + [("created_at", .string(invite.createdAt.iso8601)), ("expires_at", .string(invite.expiresAt.iso8601))])
    }

    /// A member as listed (and as PATCH answers).
    static func memberJSON(_ token: TokenRecord, online: Bool) -> JSONValue {
        .object(token.memberFields(labelled: true)
                + [("created_at", .string(token.createdAt.iso8601)), ("last_used_at", .optional(token.lastUsedAt?.iso8601)),
                   ("online", .bool(online))])
    }
}
