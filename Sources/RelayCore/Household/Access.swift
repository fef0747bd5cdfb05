// The levels are WimzProtocol's, shared with the Swift client.
@_exported import enum WimzProtocol.Access

/// What a member may do: the access table of the contract, in one place. The hub reads
/// `mayCommand` per command frame; the router and the household endpoints the rest.
public struct MemberRights: Sendable, Equatable {
    public var access: Access
    /// A guest's `control` flag (family and owners always have control).
    public var control: Bool

    public init(access: Access, control: Bool) {
        self.access = access
        self.control = control
    }

    /// `{"type":"command"}` frames and HTTP to the robot with methods other than GET/HEAD.
    public var mayCommand: Bool { access != .guest || control }
    /// `GET …/members`.
    public var mayListHousehold: Bool { access != .guest }
    /// Invite, change or remove members; list and cancel invites.
    public var mayManageHousehold: Bool { access == .owner }

    /// `"access"`, `"control"` (as listed: true for owners and family, the grant for guests) and
    /// `"until"`: how every answer and audit row states a member's access.
    public func fields(until: UnixTime?) -> [(String, JSONValue)] {
        [("access", .string(access.rawValue)), ("control", .bool(mayCommand)), ("until", .optional(until?.iso8601))]
    }
}
