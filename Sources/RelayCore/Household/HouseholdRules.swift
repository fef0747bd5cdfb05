/// The request bodies of the household endpoints (docs/protocol.md v1.3 "Invitations", "Members"),
/// read strictly: unknown or repeated members, wrong types, labels with control characters and
/// `until` in any wrong form are refused (`RelayError`, with the contract's codes) before anything is stored.
public enum HouseholdRules {
    /// How far ahead a guest's access may end.
    public static let guestHorizon: Int64 = 30 * 86_400
    /// How long an invite code can be redeemed: default and range, in seconds.
    public static let inviteLifetimeDefault: Int64 = 172_800
    public static let inviteLifetimeRange: ClosedRange<Int64> = 300...604_800
    /// Pending invites per device.
    public static let maxPendingInvites = 20
    /// Label length in characters.
    public static let labelLength = 1...64

    /// `POST /api/devices/{id}/invites`, read.
    public struct Invite: Sendable, Equatable {
        public var rights: MemberRights
        public var label: String
        public var until: UnixTime?
        public var expiresIn: Int64
    }

    /// `PATCH /api/devices/{id}/members/{token_id}`, read: only what was sent. `until` is
    /// `.some(nil)` for an explicit `null` (no end).
    public struct MemberChange: Sendable, Equatable {
        public var access: Access?
        public var control: Bool?
        public var until: UnixTime??

        /// The member after the change, by the contract's rules: control only means something for
        /// guests; a guest made family or owner loses its `until` unless one is given; a guest
        /// must end.
        public func applied(to current: MemberRights, until currentUntil: UnixTime?, now: UnixTime)
            throws(RelayError) -> (rights: MemberRights, until: UnixTime?) {
            let access = self.access ?? current.access
            let control = access == .guest ? (self.control ?? (current.access == .guest ? current.control : false)) : false
            var until: UnixTime?
            if let given = self.until {
                until = given
            } else {
                until = access == .guest || current.access != .guest ? currentUntil : nil
            }
            try HouseholdRules.checkUntil(until, for: access, now: now)
            return (MemberRights(access: access, control: control), until)
        }
    }

    public static func invite(_ body: [UInt8], now: UnixTime) throws(RelayError) -> Invite {
        let members = try object(body, allowed: ["access", "label", "control", "until", "expires_in"])
        guard let accessText = try string(members, "access") else { throw RelayError(.badRequest, "access is required: family or guest") }
        guard let access = Access(rawValue: accessText), access != .owner else {
            throw RelayError(.badRequest, accessText == "owner" ? "owners are not invited: an owner pairs with a code the robot makes"
                : "access must be family or guest")
        }
        guard let label = try self.label(members) else { throw RelayError(.badRequest, "label is required (1–64 characters)") }
        let control = try bool(members, "control") ?? false
        let until = try self.until(members) ?? nil
        if access == .guest, until == nil { throw RelayError(.invalidUntil, "a guest's access must end: until is required") }
        try checkUntil(until, for: access, now: now)
        let expiresIn = try int(members, "expires_in") ?? inviteLifetimeDefault
        guard inviteLifetimeRange.contains(expiresIn) else {
            throw RelayError(.badRequest, "expires_in must be \(inviteLifetimeRange.lowerBound) to \(inviteLifetimeRange.upperBound) seconds")
        }
        return Invite(rights: MemberRights(access: access, control: access == .guest && control), label: label,
                      until: until, expiresIn: expiresIn)
    }

    public static func memberChange(_ body: [UInt8]) throws(RelayError) -> MemberChange {
        let members = try object(body, allowed: ["access", "control", "until"])
        guard !members.isEmpty else { throw RelayError(.badRequest, "send at least one of access, control, until") }
        var change = MemberChange()
        if let text = try string(members, "access") {
            guard let access = Access(rawValue: text) else { throw RelayError(.badRequest, "access must be owner, family or guest") }
            change.access = access
        }
        change.control = try bool(members, "control")
        change.until = try until(members)
        return change
    }

    /// `until` for a member of `access`: in the future; for a guest required and at most 30 days ahead.
    static func checkUntil(_ until: UnixTime?, for access: Access, now: UnixTime) throws(RelayError) {
        guard let until else {
            if access == .guest { throw RelayError(.invalidUntil, "a guest's access must end: until is required") }
            return
        }
        if until <= now { throw RelayError(.invalidUntil, "until is in the past") }
        if access == .guest, until.microseconds - now.microseconds > guestHorizon * 1_000_000 {
            throw RelayError(.invalidUntil, "a guest's until is at most 30 days ahead")
        }
    }

    /// A member's label (also the invitee's own one at redemption): 1–64 characters, no control characters.
    public static func checkLabel(_ text: String) throws(RelayError) -> String {
        guard labelLength.contains(text.count) else { throw RelayError(.badRequest, "label must be 1 to 64 characters") }
        guard !text.unicodeScalars.contains(where: { $0.value < 0x20 || (0x7F...0x9F).contains($0.value) }) else {
            throw RelayError(.badRequest, "label must not contain control characters")
        }
        return text
    }

    // MARK: - Reading

    private static func object(_ body: [UInt8], allowed: Set<String>) throws(RelayError) -> [(String, JSONValue)] {
        guard !body.isEmpty, let value = try? JSONReader.parse(body), case .object(let members) = value else {
            throw RelayError(.invalidJSON, "the body must be a JSON object")
        }
        var seen = Set<String>()
        for (name, _) in members {
            guard allowed.contains(name) else {
                throw RelayError(.badRequest, "unknown member \(JSONValue.string(String(name.prefix(64))).encoded); allowed: "
                              + allowed.sorted().joined(separator: ", "))
            }
            guard seen.insert(name).inserted else { throw RelayError(.badRequest, "member \(name) appears twice") }
        }
        return members
    }

    private static func member(_ members: [(String, JSONValue)], _ name: String) -> JSONValue? {
        members.first { $0.0 == name }?.1
    }

    private static func string(_ members: [(String, JSONValue)], _ name: String) throws(RelayError) -> String? {
        guard let value = member(members, name) else { return nil }
        guard let text = value.stringValue else { throw RelayError(.badRequest, "\(name) must be a string") }
        return text
    }

    private static func bool(_ members: [(String, JSONValue)], _ name: String) throws(RelayError) -> Bool? {
        guard let value = member(members, name) else { return nil }
        guard let flag = value.boolValue else { throw RelayError(.badRequest, "\(name) must be true or false") }
        return flag
    }

    private static func int(_ members: [(String, JSONValue)], _ name: String) throws(RelayError) -> Int64? {
        guard let value = member(members, name) else { return nil }
        guard let number = value.intValue else { throw RelayError(.badRequest, "\(name) must be a whole number") }
        return number
    }

    private static func label(_ members: [(String, JSONValue)]) throws(RelayError) -> String? {
        guard let text = try string(members, "label") else { return nil }
        return try checkLabel(text)
    }

    /// Absent: nil; `null`: .some(nil); else an ISO 8601 time with a zone.
    private static func until(_ members: [(String, JSONValue)]) throws(RelayError) -> UnixTime?? {
        guard let value = member(members, "until") else { return nil }
        if value == .null { return .some(nil) }
        guard let text = value.stringValue, text.count <= 40, let time = UnixTime(iso8601: text) else {
            throw RelayError(.invalidUntil, "until must be an ISO 8601 time with a zone (2026-12-01T18:00:00Z) or null")
        }
        return .some(time)
    }
}
