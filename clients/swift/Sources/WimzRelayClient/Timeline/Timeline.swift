import Foundation
import WimzProtocol
import WimzSealed
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
    /// The frame: `{"type":"event","event":NAME,"data":{…}}`. On a sealed device the robot's
    /// frame as it sealed it once this app opened it (``sealing``), else the sealed frame.
    public var message: JSON
    /// On a sealed device, for the robot's entries: whether this app opened the frame (nil: a
    /// frame that was never sealed).
    public var sealing: Sealing?

    /// How a sealed entry was read (v1.6, with the epochs this member holds).
    public enum Sealing: Sendable, Equatable, Codable {
        /// Opened with epoch `epoch`'s secret; `sealedAt` the robot's clock when it sealed it.
        case opened(epoch: Int, sealedAt: Date)
        /// Left sealed: `message` is the sealed frame and ``event`` its kind (an epoch this member
        /// holds no secret of — before it joined, unless an owner shared that history — or a
        /// frame that does not verify).
        case unopened(FrameRejection)
    }

    /// The frame's `data` (`null` for one left sealed).
    public var data: JSON { message["data"] ?? .null }

    /// Whether this entry is past state at `now`: older than 120 s by the robot's clock when it
    /// sealed it, or else by the relay's receipt. Show it "as of" its time, never as the robot's
    /// state now or a fresh alert (a `mode_changed` of yesterday says what the mode was then).
    public func isPastState(at now: Date = Date()) -> Bool {
        var when = at
        if case .opened(_, let sealedAt)? = sealing { when = sealedAt }
        return now.timeIntervalSince(when) * 1000 > Double(AppOpener.freshWindow)
    }

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
    /// One page of the household's timeline (`GET …/timeline`, any member). On a sealed device
    /// the robot's entries come opened with the epochs this member holds, fetching earlier ones it
    /// was a member of, and those an owner shared with it (``TimelineEntry/sealing``).
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
        return TimelinePage(entries: await opened(entries), next: body["next"]?.stringValue, begins: begins)
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
