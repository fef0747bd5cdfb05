import ArgumentParser
import Foundation
import WimzRelayClient

/// `--timeline` and `--away-since`: the household's timeline from the terminal (docs/protocol.md
/// v1.6), as the app's history screen and its "while you were away" card show it. Each prints one
/// JSON object and exits; a refusal is the relay's error and exit 2.
struct TimelineCommands {
    let client: RelayClient

    /// Prints `{"begins":TIME,"entries":[{"id","at","source","event","data"}…],"next":ID|null}`, the newest page.
    func show(limit: Int) async throws {
        let page = try await client.timelinePage(limit: limit)
        let entries = page.entries.map { entry in
            #"{"id":"\#(entry.id)","at":"\#(entry.at.formatted(.iso8601))","source":"\#(entry.source.rawValue)","event":"\#(entry.event)","data":\#(entry.data.text)}"#
        }
        print(#"{"begins":"\#(page.begins.formatted(.iso8601))","entries":[\#(entries.joined(separator: ","))],"next":\#(page.next.map { "\"\($0)\"" } ?? "null")}"#)
    }

    /// Syncs the copy (kept in `file` between runs when given) and prints what happened since `since`.
    func away(since: Date, file: String?) async throws {
        let copy = TimelineCopy(client: client, store: file.map { FileTimelineStore(url: URL(fileURLWithPath: $0)) })
        let fresh = try await copy.sync()
        let summary = await copy.summary(since: since)
        func counts(_ c: AwaySummary.Counts) -> String {
            #"{"barks":\#(c.barks),"treats":\#(c.treats),"tricks_done":\#(c.tricksDone),"tricks_failed":\#(c.tricksFailed),"missions_completed":\#(c.missionsCompleted)}"#
        }
        let dogs = summary.byDog.compactMap { dog, c in dog.map { #""\#($0)":\#(counts(c))"# } }.sorted()
        let begins = await copy.snapshot.begins.map { "\"\($0.formatted(.iso8601))\"" } ?? "null"
        print(#"{"since":"\#(since.formatted(.iso8601))","begins":\#(begins),"new_entries":\#(fresh.count),"total":\#(counts(summary.total)),"by_dog":{\#(dogs.joined(separator: ","))},"offline_seconds":\#(Int(summary.offline.rounded()))}"#)
    }

    /// Runs whichever was asked for; false when neither was.
    static func run(_ demo: AppDemo, client: RelayClient) async throws -> Bool {
        let commands = TimelineCommands(client: client)
        return try await exitingOnRefusal {
            if let text = demo.awaySince {
                guard let since = try? Date(text, strategy: .iso8601) else {
                    throw ValidationError("--away-since takes an ISO 8601 time with a zone, e.g. 2026-12-01T18:00:00Z")
                }
                try await commands.away(since: since, file: demo.timelineFile)
                return true
            }
            if demo.timeline {
                try await commands.show(limit: demo.timelineLimit)
                return true
            }
            return false
        }
    }
}
