import Foundation

/// Fans every event out to any number of subscribers (each its own buffered stream).
final class EventBroadcaster: @unchecked Sendable {
    private let lock = NSLock()
    private var sinks: [UInt64: AsyncStream<RelayEvent>.Continuation] = [:]
    private var next: UInt64 = 0
    private var finished = false

    func subscribe(bufferingNewest count: Int) -> AsyncStream<RelayEvent> {
        let (stream, sink) = AsyncStream.makeStream(of: RelayEvent.self, bufferingPolicy: .bufferingNewest(count))
        lock.lock()
        defer { lock.unlock() }
        if finished {
            sink.finish()
            return stream
        }
        next += 1
        let id = next
        sinks[id] = sink
        sink.onTermination = { [weak self] _ in self?.remove(id) }
        return stream
    }

    private func remove(_ id: UInt64) {
        lock.lock()
        sinks[id] = nil
        lock.unlock()
    }

    func yield(_ event: RelayEvent) {
        lock.lock()
        let all = Array(sinks.values)
        lock.unlock()
        for sink in all { sink.yield(event) }
    }

    func finish() {
        lock.lock()
        finished = true
        let all = Array(sinks.values)
        sinks.removeAll()
        lock.unlock()
        for sink in all { sink.finish() }
    }
}
