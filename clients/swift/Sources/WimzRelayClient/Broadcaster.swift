import Foundation

/// Fans every value (the client's events, its TURN credentials) out to any number of
/// subscribers, each its own buffered stream.
final class Broadcaster<Value: Sendable>: @unchecked Sendable {
    private let lock = NSLock()
    private var sinks: [UInt64: AsyncStream<Value>.Continuation] = [:]
    private var next: UInt64 = 0
    private var finished = false

    func subscribe(bufferingNewest count: Int) -> AsyncStream<Value> {
        let (stream, sink) = AsyncStream.makeStream(of: Value.self, bufferingPolicy: .bufferingNewest(count))
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

    func yield(_ value: Value) {
        lock.lock()
        let all = Array(sinks.values)
        lock.unlock()
        for sink in all { sink.yield(value) }
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
