import Foundation

/// Where a phone keeps its copy of the timeline: a file (``FileTimelineStore``, what Linux and the
/// demo use), or on Apple platforms the app's choice (SwiftData, Core Data, a file in its
/// container) behind these two calls.
public protocol TimelineStore: Sendable {
    func load() throws -> TimelineCopy.Snapshot?
    func save(_ snapshot: TimelineCopy.Snapshot) throws
}

/// A copy kept as one JSON file, replaced atomically on each save.
public struct FileTimelineStore: TimelineStore {
    public let url: URL

    public init(url: URL) { self.url = url }

    public func load() throws -> TimelineCopy.Snapshot? {
        guard FileManager.default.fileExists(atPath: url.path) else { return nil }
        return try JSONDecoder().decode(TimelineCopy.Snapshot.self, from: Data(contentsOf: url))
    }

    /// Written for this user alone: the household's opened history is in it.
    public func save(_ snapshot: TimelineCopy.Snapshot) throws {
        #if os(Linux)
        try JSONEncoder().encode(snapshot).write(to: url, options: .atomic)
        try FileManager.default.setAttributes([.posixPermissions: 0o600], ofItemAtPath: url.path)
        #else
        try JSONEncoder().encode(snapshot).write(to: url, options: [.atomic, .completeFileProtection])
        #endif
    }
}

/// The phone's copy of the household's timeline, kept in sync: ``sync()`` pulls what is new —
/// after the newest entry kept, or from `begins` the first time — on connect and on each
/// `{"type":"timeline"}` notice (``RelayEvent/timelineChanged(newest:)``). What the relay no
/// longer serves (older than `begins`: pruned, erased, before a guest joined) is dropped from the
/// copy too, and `begins` tells the UI where history starts.
public actor TimelineCopy {
    /// What is kept: the entries oldest first, and where the view begins.
    public struct Snapshot: Sendable, Equatable, Codable {
        public var entries: [TimelineEntry] = []
        /// The earliest moment the relay serves this member (nil: not synced yet).
        public var begins: Date?
    }

    private let client: RelayClient
    private let store: (any TimelineStore)?
    private let maxEntries: Int
    public private(set) var snapshot: Snapshot

    /// `store`: where the copy lives between launches (nil: in memory only); at most
    /// `maxEntries` are kept, the oldest dropped first.
    public init(client: RelayClient, store: (any TimelineStore)? = nil, maxEntries: Int = 10_000) {
        self.client = client
        self.store = store
        self.maxEntries = maxEntries
        let kept: Snapshot?? = try? store?.load()
        snapshot = kept.flatMap { $0 } ?? Snapshot()
    }

    public var entries: [TimelineEntry] { snapshot.entries }

    /// Pulls every entry after the newest kept and saves the copy; returns the new ones, oldest
    /// first. Entries arriving meanwhile come with the next sync.
    @discardableResult
    public func sync() async throws -> [TimelineEntry] {
        var fresh: [TimelineEntry] = []
        var begins = snapshot.begins
        for try await page in client.timelinePages(.oldestFirst(after: snapshot.entries.last?.id), limit: 500) {
            fresh += page.entries
            begins = page.begins
        }
        var copy = snapshot
        // Entries left sealed open once this member holds their epoch (an owner shared history).
        if copy.entries.contains(where: \.isLeftSealed) { copy.entries = await client.opened(copy.entries) }
        copy.begins = begins
        copy.entries = (copy.entries.filter { begins.map($0.at.isAfterOrAt) ?? true } + fresh).suffix(maxEntries).map { $0 }
        snapshot = copy
        try store?.save(copy)
        return fresh
    }

    /// A summary of what happened since `since` (the phone's last look), from this copy alone:
    /// no server sees it.
    public func summary(since: Date, now: Date = Date()) -> AwaySummary {
        AwaySummary(entries: snapshot.entries, since: since, now: now)
    }
}

extension TimelineEntry {
    fileprivate var isLeftSealed: Bool { if case .unopened? = sealing { true } else { false } }
}

extension Date {
    fileprivate func isAfterOrAt(_ begins: Date) -> Bool { self >= begins }
}
