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
        let paths = PathChangeWatch(reconnect: reconnect)
        monitor.pathUpdateHandler = { path in paths.update(NetworkPathSnapshot(path)) }
        monitor.start(queue: DispatchQueue(label: "wimz.relay-client.path"))
        #if canImport(UIKit) && !os(watchOS)
        let observer = NotificationCenter.default.addObserver(forName: UIApplication.willEnterForegroundNotification,
                                                              object: nil, queue: nil) { _ in Task { await reconnect() } }
        return Watchers(monitor: monitor, paths: paths, observer: observer)
        #else
        return Watchers(monitor: monitor, paths: paths, observer: nil)
        #endif
        #else
        return nil
        #endif
    }

    #if canImport(Network)
    final class Watchers: @unchecked Sendable {
        let monitor: NWPathMonitor
        let paths: PathChangeWatch
        let observer: (any NSObjectProtocol)?
        init(monitor: NWPathMonitor, paths: PathChangeWatch, observer: (any NSObjectProtocol)?) {
            self.monitor = monitor
            self.paths = paths
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
