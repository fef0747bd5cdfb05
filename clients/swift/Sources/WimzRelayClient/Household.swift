import Foundation
import WimzProtocol
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
// Access levels live in WimzProtocol, shared with the relay.
@_exported import enum WimzProtocol.Access

/// What this app's token may do on its device (v1.3): its level, whether it may send commands
/// and change things through the robot's API, and when its access ends. The relay states it in
/// the socket's `device_status` greeting and in `GET /api/devices/ID/status`.
public struct MemberAccess: Sendable, Equatable {
    public var tokenID: Int64
    public var access: Access
    /// May send commands and use the robot's API beyond GET/HEAD: always for owners and family,
    /// a guest's grant otherwise.
    public var control: Bool
    /// When the access ends (the token expires then); nil: no end.
    public var until: Date?

    /// Reads `{"token_id","access","control","until"}`; nil when a field is missing.
    init?(_ json: JSON?) {
        guard let json, let id = json["token_id"]?.intValue,
              let access = json["access"]?.stringValue.flatMap(Access.init(rawValue:)),
              let control = json["control"]?.boolValue else { return nil }
        tokenID = Int64(id)
        self.access = access
        self.control = control
        until = json["until"]?.stringValue.flatMap(ISO8601.date)
    }
}

/// A member of the household as `GET …/members` lists it: every app token of the device that is
/// neither revoked nor expired.
public struct Member: Sendable, Equatable {
    public var access: MemberAccess
    public var label: String
    public var createdAt: Date?
    public var lastUsedAt: Date?
    /// A socket of this token is connected now.
    public var online: Bool

    init?(_ json: JSON) {
        guard let access = MemberAccess(json), let label = json["label"]?.stringValue else { return nil }
        self.access = access
        self.label = label
        createdAt = json["created_at"]?.stringValue.flatMap(ISO8601.date)
        lastUsedAt = json["last_used_at"]?.stringValue.flatMap(ISO8601.date)
        online = json["online"]?.boolValue ?? false
    }
}

/// An invitation: its code (only in the answer that created it; show it once, e.g. as a QR
/// code), who it makes of the person who redeems it, and until when it can be redeemed.
public struct Invite: Sendable, Equatable {
    public var id: Int64
    /// The code to redeem with ``RelayClient/pair(relay:code:label:session:)``; nil in ``RelayClient/invites()``.
    public var code: String?
    public var access: Access
    public var control: Bool
    /// When the invitee's access will end; nil: no end.
    public var until: Date?
    public var label: String?
    public var createdAt: Date?
    /// The code stops working then.
    public var expiresAt: Date?

    init?(_ json: JSON) {
        guard let id = json["invite_id"]?.intValue, let access = json["access"]?.stringValue.flatMap(Access.init(rawValue:)),
              let control = json["control"]?.boolValue else { return nil }
        self.id = Int64(id)
        code = json["code"]?.stringValue
        self.access = access
        self.control = control
        until = json["until"]?.stringValue.flatMap(ISO8601.date)
        label = json["label"]?.stringValue
        createdAt = json["created_at"]?.stringValue.flatMap(ISO8601.date)
        expiresAt = json["expires_at"]?.stringValue.flatMap(ISO8601.date)
    }
}

/// What ``RelayClient/updateMember(_:access:control:until:)`` does to a member's end of access.
public enum UntilChange: Sendable, Equatable {
    /// Leave it (a guest made family or owner still loses it, as the relay's rule says).
    case unchanged
    /// No end.
    case removed
    case at(Date)
}

extension RelayClient {
    // MARK: - Invitations (owners)

    /// Invites someone: family, or a guest until `until` (required for guests, at most 30 days
    /// ahead) who may send commands only with `control`. The code can be redeemed for
    /// `codeValidFor` (the relay's default, 48 h, when nil).
    /// - Throws: ``RelayClientError/forbidden(code:message:)`` for a caller that is not an owner,
    ///   ``RelayClientError/http(status:code:message:)`` with `too_many_invites`, `invalid_until`
    ///   or `bad_request`.
    public func invite(access: Access, label: String, control: Bool = false, until: Date? = nil,
                       codeValidFor: Duration? = nil) async throws -> Invite {
        var body: [String: JSON] = ["access": .string(access.rawValue), "label": .string(label)]
        if access == .guest { body["control"] = .bool(control) }
        if let until { body["until"] = .string(until.formatted(.iso8601)) }
        if let codeValidFor { body["expires_in"] = .integer(codeValidFor.components.seconds) }
        let answer = try await deviceCall("POST", .invites, body: .object(body), expecting: 201)
        return try read(answer, as: "invite", Invite.init)
    }

    /// The pending invitations (never their codes again).
    public func invites() async throws -> [Invite] {
        let answer = try await deviceCall("GET", .invites)
        return try readList(answer, "invites", Invite.init)
    }

    /// Cancels an invitation: its code stops working.
    public func cancelInvite(_ inviteID: Int64) async throws {
        _ = try await deviceCall("DELETE", .invites, [String(inviteID)], expecting: 204)
    }

    // MARK: - Members

    /// The household (owners and family; a guest gets ``RelayClientError/forbidden(code:message:)``).
    public func members() async throws -> [Member] {
        let answer = try await deviceCall("GET", .members)
        return try readList(answer, "members", Member.init)
    }

    /// Changes a member's access (owners): the change applies to its live sockets at once. In a
    /// sealed household this app then signs the next roster with the change as asked
    /// (``signHouseholdChanges()`` follows others' changes only where they take rights away).
    /// - Throws: `last_owner` (409) for the last owner, `invalid_until` for a guest without a
    ///   valid `until`, 404 for a token that is not a member of this device.
    public func updateMember(_ tokenID: Int64, access: Access? = nil, control: Bool? = nil,
                             until: UntilChange = .unchanged) async throws -> Member {
        var body: [String: JSON] = [:]
        if let access { body["access"] = .string(access.rawValue) }
        if let control { body["control"] = .bool(control) }
        switch until {
        case .unchanged: break
        case .removed: body["until"] = .null
        case .at(let date): body["until"] = .string(date.formatted(.iso8601))
        }
        let answer = try await deviceCall("PATCH", .members, [String(tokenID)], body: .object(body))
        let member = try read(answer, as: "member", Member.init)
        // A sealed household: the change goes into the next roster too, as this app's user asked it
        // (after the current epoch, which a roster this app signed a moment ago may have just made).
        if seal != nil {
            _ = try? await refreshSealedEpoch()
            _ = try? await signHouseholdChanges(asked: MemberChange(tokenID: tokenID, access: access, control: control, until: until))
        }
        return member
    }

    /// Removes a member (owners): its sockets close, its push registrations go and its live
    /// video through TURN is cut. In a sealed household this app then signs the next roster
    /// without it (``signHouseholdChanges()``), so the member can't open what comes next.
    public func removeMember(_ tokenID: Int64) async throws {
        _ = try await deviceCall("DELETE", .members, [String(tokenID)], expecting: 204)
        // A sealed household: the member's key leaves the roster too (a new epoch it can't open).
        _ = try? await signHouseholdChanges()
    }

    /// Leaves the household: this app's token is revoked, so the client stops
    /// (``RelayClientError/revoked(reason:)``). The last owner can't leave (`last_owner`).
    public func leave() async throws {
        let own = if let member { member } else { try await refreshMember() }
        _ = try await deviceCall("DELETE", .members, [String(own.tokenID)], expecting: 204)
    }

    /// Asks the relay for this app's own access (`GET …/status`); ``member`` holds it after.
    @discardableResult
    public func refreshMember() async throws -> MemberAccess {
        let answer = try await deviceCall("GET", .status)
        let own = try read(answer, as: "status", { MemberAccess($0["member"]) })
        member = own
        return own
    }

    // MARK: - Calls

    /// `METHOD /api/devices/ID/<resource>[/<id>]` with the app token; the JSON of the expected answer.
    func deviceCall(_ method: String, _ resource: WimzProtocol.Path.DeviceResource, _ segments: [String] = [],
                               body: JSON? = nil, expecting status: Int = 200) async throws -> JSON {
        var request = URLRequest(url: relayURL(httpBase, WimzProtocol.Path.device(configuration.deviceID, resource, segments)))
        request.httpMethod = method
        request.httpBody = body.map { Data($0.text.utf8) }
        let data = try await relayCall(request, token: currentToken, session: configuration.urlSession, expecting: status,
                                       retry: requestRetry)
        guard status != 204 else { return .null }
        do { return try JSON(parsing: String(decoding: data, as: UTF8.self)) } catch {
            throw RelayClientError.invalidResponse("\(([resource.rawValue] + segments).joined(separator: "/")): not JSON")
        }
    }

    private func read<T>(_ json: JSON, as what: String, _ make: (JSON) -> T?) throws -> T {
        guard let value = make(json) else { throw RelayClientError.invalidResponse("\(what): \(json.text.prefix(200))") }
        return value
    }

    private func readList<T>(_ json: JSON, _ key: String, _ make: (JSON) -> T?) throws -> [T] {
        guard case .array(let items)? = json[key] else { throw RelayClientError.invalidResponse("\(key): no list") }
        return try items.map { try read($0, as: key, make) }
    }
}
