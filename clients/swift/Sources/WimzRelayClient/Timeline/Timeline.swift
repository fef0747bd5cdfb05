import Foundation
import WimzProtocol
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

/// One entry of the household's timeline (docs/protocol.md v1.6): the robot's frame as it sent
/// it (a bark, a treat, a finished mission…) or the relay's own (the robot gone or back, who
/// joined or left).
public struct TimelineEntry: Sendable, Equatable, Codable, Identifiable {
    public enum Source: String, Sendable, Codable { case robot, relay }

    /// Ordered as byte strings: a later entry's is greater (the next page's cursor).
    public var id: String
    /// When the relay received it.
    public var at: Date
    public var source: Source
    /// The robot's event name (a sealed frame's kind), or the relay's own entry's.
    public var event: String
    /// The frame: `{"type":"event","event":NAME,"data":{…}}` (a sealed frame on a sealed device).
    public var message: JSON

    /// The frame's `data` (`null` for a sealed one).
    public var data: JSON { message["data"] ?? .null }

    init?(_ json: JSON) {
        guard let id = json["id"]?.stringValue, let at = json["at"]?.stringValue.flatMap(ISO8601.date),
              let source = json["source"]?.stringValue.flatMap(Source.init(rawValue:)), let event = json["event"]?.stringValue,
              let message = json["message"] else { return nil }
        (self.id, self.at, self.source, self.event, self.message) = (id, at, source, event, message)
    }

    public init(id: String, at: Date, source: Source, event: String, message: JSON) {
        (self.id, self.at, self.source, self.event, self.message) = (id, at, source, event, message)
    }
}

/// One page of the timeline: its entries, the cursor of the next (nil: the page reached the end
/// when it was read), and where this caller's view begins — nothing before it is served, so a
/// copy whose newest entry is older than `begins` has a hole there ("history starts here").
public struct TimelinePage: Sendable, Equatable {
    public var entries: [TimelineEntry]
    public var next: String?
    public var begins: Date
}

/// Which way a reading goes.
public enum TimelineDirection: Sendable, Equatable {
    /// Newest first, from before `cursor` (nil: the newest entry).
    case newestFirst(before: String?)
    /// Oldest first, from after `cursor` (nil: from `begins`).
    case oldestFirst(after: String?)
}

extension RelayClient {
    /// One page of the household's timeline (`GET …/timeline`, any member).
    /// - Throws: ``RelayClientError/http(status:code:message:)`` with `invalid_cursor` (another
    ///   device's cursor, or a malformed one) or `invalid_limit` (1–500).
    public func timelinePage(_ direction: TimelineDirection = .newestFirst(before: nil), limit: Int = 50,
                             events: [String]? = nil) async throws -> TimelinePage {
        var components = URLComponents(url: relayURL(httpBase, WimzProtocol.Path.device(configuration.deviceID, .timeline)),
                                       resolvingAgainstBaseURL: false)!
        var query = [URLQueryItem(name: "limit", value: String(limit))]
        switch direction {
        case .newestFirst(let cursor?): query.append(URLQueryItem(name: "before", value: cursor))
        case .newestFirst(nil): break
        case .oldestFirst(let cursor): query.append(URLQueryItem(name: "after", value: cursor ?? ""))
        }
        if let events { query.append(URLQueryItem(name: "events", value: events.joined(separator: ","))) }
        components.queryItems = query
        let data = try await relayCall(URLRequest(url: components.url!), token: currentToken, session: configuration.urlSession,
                                       retry: requestRetry)
        let body = (try? JSON(parsing: String(decoding: data, as: UTF8.self))) ?? .null
        guard case .array(let items)? = body["entries"], let begins = body["begins"]?.stringValue.flatMap(ISO8601.date) else {
            throw RelayClientError.invalidResponse("timeline: \(body.text.prefix(200))")
        }
        let entries = try items.map { item in
            guard let entry = TimelineEntry(item) else { throw RelayClientError.invalidResponse("timeline entry: \(item.text.prefix(200))") }
            return entry
        }
        return TimelinePage(entries: entries, next: body["next"]?.stringValue, begins: begins)
    }

    /// The timeline's pages, one after another until the end (as it was when each was read):
    /// `for try await page in client.timelinePages(.oldestFirst(after: newestKept)) { … }`.
    public nonisolated func timelinePages(_ direction: TimelineDirection = .newestFirst(before: nil), limit: Int = 100,
                                          events: [String]? = nil) -> TimelinePages {
        TimelinePages(client: self, direction: direction, limit: limit, events: events)
    }
}

/// The pages of ``RelayClient/timelinePages(_:limit:events:)``: each read when asked for.
public struct TimelinePages: AsyncSequence, Sendable {
    public typealias Element = TimelinePage
    let client: RelayClient
    let direction: TimelineDirection
    let limit: Int
    let events: [String]?

    public struct AsyncIterator: AsyncIteratorProtocol {
        let pages: TimelinePages
        var direction: TimelineDirection?

        public mutating func next() async throws -> TimelinePage? {
            guard let current = direction else { return nil }
            let page = try await pages.client.timelinePage(current, limit: pages.limit, events: pages.events)
            direction = page.next.map { cursor in
                if case .newestFirst = current { .newestFirst(before: cursor) } else { .oldestFirst(after: cursor) }
            }
            return page
        }
    }

    public func makeAsyncIterator() -> AsyncIterator { AsyncIterator(pages: self, direction: direction) }
}
