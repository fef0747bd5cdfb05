import Foundation
#if canImport(Network)
import Network
#endif
#if canImport(UIKit) && !os(watchOS)
import UIKit
#endif

/// What makes a phone's socket stale without it noticing: a network path change (Wi-Fi ↔
/// cellular) and a return to the foreground. On Apple platforms both call `reconnect`; on Linux
/// the same code runs on inert stand-ins (at the end of this file), so the compiler checks it, and
/// nothing is watched (``RelayClient/reconnectNow()`` can still be called).
package enum PlatformWatchers {
    /// Starts watching the network path and the app's return to the foreground; keep the result
    /// alive as long as the client runs.
    static func start(_ reconnect: @escaping @Sendable () async -> Void) -> (any Sendable)? {
        watch(foreground: true, reconnect)
    }

    /// The network path only (RobotAPI's choice of route); watching ends with the result.
    package static func watchPath(_ changed: @escaping @Sendable () async -> Void) -> (any Sendable)? {
        watch(foreground: false, changed)
    }

    private static func watch(foreground: Bool, _ changed: @escaping @Sendable () async -> Void) -> (any Sendable)? {
        #if canImport(Network) || os(Linux)
        let monitor = NWPathMonitor()
        let paths = PathChangeWatch(reconnect: changed)
        monitor.pathUpdateHandler = { path in paths.update(NetworkPathSnapshot(path)) }
        monitor.start(queue: DispatchQueue(label: "wimz.relay-client.path"))
        var observer: (any NSObjectProtocol)?
        #if (canImport(UIKit) && !os(watchOS)) || os(Linux)
        if foreground {
            observer = NotificationCenter.default.addObserver(forName: UIApplication.willEnterForegroundNotification,
                                                              object: nil, queue: nil) { _ in Task { await changed() } }
        }
        #endif
        return Watchers(monitor: monitor, paths: paths, observer: observer)
        #else
        return nil
        #endif
    }

    #if canImport(Network) || os(Linux)
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

#if os(Linux)
// Linux stand-ins for what the app library uses of Apple's Network and UIKit frameworks, so
// that the code written for iOS (the platform watchers, RobotAPI's path monitor) is compiled
// and checked by Swift 6 here too. Their declarations follow Apple's documentation of the
// frameworks (developer.apple.com, read in November 2026; no Apple SDK exists on Linux to copy
// them from): `NWPathMonitor` is a `final class` whose `pathUpdateHandler` is
// `@preconcurrency (@Sendable (NWPath) -> Void)?`; `UIApplication` is `@MainActor`, its
// notification names `nonisolated`. Nothing here ever fires: on Linux no path changes and no
// app comes to the foreground.

/// Network's path monitor (`Network.NWPathMonitor`), inert.
package final class NWPathMonitor {
    @preconcurrency package final var pathUpdateHandler: (@Sendable (NWPath) -> Void)?
    package init() {}
    package final func start(queue: DispatchQueue) {}
    package final func cancel() {}
}

/// Network's path (`Network.NWPath`): what the watchers read of it.
package struct NWPath: Sendable {
    package enum Status: Sendable, Equatable { case satisfied, unsatisfied, requiresConnection }
    package var status: Status
    package var availableInterfaces: [NWInterface]
}

/// Network's interface (`Network.NWInterface`): its BSD name (`en0`, `pdp_ip0`).
package struct NWInterface: Sendable {
    package var name: String
}

/// UIKit's application (`UIKit.UIApplication`): the foreground notification's name.
@MainActor package final class UIApplication {
    package nonisolated static let willEnterForegroundNotification = Notification.Name("UIApplicationWillEnterForegroundNotification")
}
#endif
