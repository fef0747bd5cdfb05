import Foundation
#if canImport(Network)
import Network
#endif
#if canImport(UIKit) && !os(watchOS)
import UIKit
#endif

/// What makes a phone's socket stale without it noticing: a network path change (Wi-Fi ↔
/// cellular) and a return to the foreground. On Apple platforms both call `reconnect`; on Linux
/// there is nothing to watch (``RelayClient/reconnectNow()`` can still be called).
enum PlatformWatchers {
    /// Starts watching; keep the result alive as long as the client runs.
    static func start(_ reconnect: @escaping @Sendable () async -> Void) -> (any Sendable)? {
        #if canImport(Network)
        let monitor = NWPathMonitor()
        let first = Locked(true)
        monitor.pathUpdateHandler = { _ in
            // The first update is the current path, not a change.
            if first.withLock({ let was = $0; $0 = false; return was }) { return }
            Task { await reconnect() }
        }
        monitor.start(queue: DispatchQueue(label: "wimz.relay-client.path"))
        #if canImport(UIKit) && !os(watchOS)
        let observer = NotificationCenter.default.addObserver(forName: UIApplication.willEnterForegroundNotification,
                                                              object: nil, queue: nil) { _ in Task { await reconnect() } }
        return Watchers(monitor: monitor, observer: observer)
        #else
        return Watchers(monitor: monitor, observer: nil)
        #endif
        #else
        return nil
        #endif
    }

    #if canImport(Network)
    final class Watchers: @unchecked Sendable {
        let monitor: NWPathMonitor
        let observer: (any NSObjectProtocol)?
        init(monitor: NWPathMonitor, observer: (any NSObjectProtocol)?) {
            self.monitor = monitor
            self.observer = observer
        }
        deinit {
            monitor.cancel()
            if let observer { NotificationCenter.default.removeObserver(observer) }
        }
    }
    #endif
}

/// A value behind a lock.
final class Locked<Value>: @unchecked Sendable {
    private let lock = NSLock()
    private var value: Value
    init(_ value: Value) { self.value = value }
    func withLock<T>(_ body: (inout Value) -> T) -> T {
        lock.lock()
        defer { lock.unlock() }
        return body(&value)
    }
}
