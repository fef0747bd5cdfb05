import RelayCore
import RelayStore

/// The household's timeline over HTTP (docs/protocol.md "The household's timeline", v1.6):
///
///     GET    /api/devices/{id}/timeline?limit=&before=|after=&events=   app → 200 {"entries","next","begins"}
///     DELETE /api/devices/{id}/timeline                                  owner → 204 (every entry erased)
///     GET    /api/devices/{id}/timeline/settings                         any member, or the robot → {"days"}
///     PUT    /api/devices/{id}/timeline/settings {"days":N}              owner → 200 {"days"}
///
/// Choices where the contract is silent: an empty `before=` is `invalid_cursor` (only `after=`
/// has a meaning empty); `events=` empty matches nothing, as a name outside the timeline does;
/// the body of `PUT …/settings` must be exactly `{"days":N}` (another member: 400 `invalid_days`).
final class TimelineEndpoint {
    private let env: RelayEnvironment
    private let authenticator: Authenticator
    private let database: DatabaseExchanges
    /// Pages answered and the entries in them, by order: counted on the database worker's thread.
    private let served = Locked((newestFirst: 0, oldestFirst: 0, entries: 0))

    init(env: RelayEnvironment, authenticator: Authenticator, database: DatabaseExchanges) {
        (self.env, self.authenticator, self.database) = (env, authenticator, database)
    }

    func handle(_ request: HTTPRequest, _ call: Route.TimelineCall, entry: CredentialEntry, body: [UInt8]?) -> HTTPResponse? {
        let device = entry.token.deviceID, token = entry.token.id
        let defaultDays = env.configuration.timelineDays, maxDays = env.configuration.timelineMaxDays
        let address = authenticator.clientAddress(request)
        switch call {
        case .read:
            let query: PageQuery
            do throws(RelayError) { query = try PageQuery(request.head, device: device) } catch { return .error(error) }
            let clock = env.clock, served = self.served
            return database.answer(request) { db in
                let repository = TimelineRepository(db)
                let window = try repository.window(device: device, token: token)
                let begins = TimelineRules.begins(now: clock.wall(), days: window.days ?? defaultDays, erasedAt: window.erasedAt,
                                                  keptSince: window.keptSince, guestSince: window.guestSince)
                let page = try repository.page(device: device, begins: begins, cursor: query.cursor, newestFirst: query.newestFirst,
                                               limit: query.limit, events: query.events, guest: window.guestSince != nil)
                served.withLock { count in
                    if query.newestFirst { count.newestFirst += 1 } else { count.oldestFirst += 1 }
                    count.entries += page.entries.count
                }
                return .json(200, .object([("entries", .array(page.entries.map(\.json))),
                                           ("next", page.more ? .optional(page.entries.last?.id.text) : .null),
                                           ("begins", .string(begins.iso8601Milliseconds))]))
            }
        case .erase:
            return database.answer(request) { db in
                try TimelineRepository(db).erase(device: device, by: token, address: address)
                return .noContent
            }
        case .readSettings:
            return database.answer(request) { db in
                .json(200, .object([("days", .int(Int64(try TimelineRepository(db).days(device: device) ?? defaultDays)))]))
            }
        case .writeSettings:
            guard let body else { return .error(.notSupported, "the timeline's settings need the relay's own HTTP front") }
            guard case .object(let members)? = try? JSONReader.parse(body), members.count == 1, members[0].0 == "days",
                  case .int(let days) = members[0].1, (1...Int64(maxDays)).contains(days) else {
                return .error(.invalidDays, "the body is {\"days\":N}, N a whole number of days from 1 to \(maxDays)")
            }
            return database.answer(request) { db in
                try TimelineRepository(db).setDays(device: device, Int(days), by: token, address: address)
                return .json(200, .object([("days", .int(days))]))
            }
        }
    }

    /// A page request's arguments, checked: at most one cursor of this device, a limit, names.
    struct PageQuery {
        var cursor: Int64?
        var newestFirst: Bool
        var limit: Int
        var events: [String]?

        init(_ head: HTTPRequestHead, device: DeviceID) throws(RelayError) {
            let before = try head.argument("before"), after = try head.argument("after")
            guard let limit = TimelineRules.limit(try head.argument("limit")) else {
                throw RelayError(.invalidLimit, "limit is a whole number from 1 to 500")
            }
            self.limit = limit
            if before != nil, after != nil { throw RelayError(.invalidCursor, "one cursor at most: before or after") }
            newestFirst = after == nil
            events = try head.argument("events").map { $0.split(separator: ",", omittingEmptySubsequences: false).map(String.init) }
            // `after=` empty starts at begins; neither cursor: the newest.
            if let text = before ?? after, before != nil || !text.isEmpty {
                guard let id = TimelineID(text, device: device) else {
                    throw RelayError(.invalidCursor, "not an entry ID of this device: \(text.prefix(64))")
                }
                cursor = id.number
            } else {
                cursor = nil
            }
        }
    }
}

extension TimelineEndpoint: MetricsReporting {
    func report(to metrics: MetricsSink) {
        let count = served.current
        for (order, pages) in [("newest_first", count.newestFirst), ("oldest_first", count.oldestFirst)] {
            metrics.counter("wimz_timeline_pages_served_total", "Timeline pages this node answered, by order (before= or neither: newest first; after=: oldest first).",
                            [("order", order)], pages)
        }
        metrics.counter("wimz_timeline_entries_served_total", "Timeline entries in the pages this node answered.", count.entries)
    }
}
