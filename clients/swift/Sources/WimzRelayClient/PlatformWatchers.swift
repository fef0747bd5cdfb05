import Foundation
#if canImport(Network)
import Network
#endif
#if canImport(UIKit) && !os(watchOS)
import UIKit
#endif

/// What makes a phone's socket stale without it noticing — a network path change (Wi-Fi ↔
/// cellular) — and the app's trips to the background and back. On Apple platforms these call the
/// client; on Linux the same code runs on inert stand-ins (at the end of this file), so the
/// compiler checks it, and nothing is watched (the client's methods can still be called).
package enum PlatformWatchers {
    /// What the client does for each: keep the result alive as long as the client runs.
    static func start(pathChanged: @escaping @Sendable () async -> Void, background: @escaping @Sendable () async -> Void,
                      foreground: @escaping @Sendable () async -> Void) -> (any Sendable)? {
        watch(pathChanged, lifecycle: (background, foreground))
    }

    /// The network path only (RobotAPI's choice of route); watching ends with the result.
    package static func watchPath(_ changed: @escaping @Sendable () async -> Void) -> (any Sendable)? {
        watch(changed, lifecycle: nil)
    }

    private static func watch(_ changed: @escaping @Sendable () async -> Void,
                              lifecycle: (background: @Sendable () async -> Void, foreground: @Sendable () async -> Void)?)
        -> (any Sendable)? {
        #if canImport(Network) || os(Linux)
        let monitor = NWPathMonitor()
        let paths = PathChangeWatch(reconnect: changed)
        monitor.pathUpdateHandler = { path in paths.update(NetworkPathSnapshot(path)) }
        monitor.start(queue: DispatchQueue(label: "wimz.relay-client.path"))
        var observers: [any NSObjectProtocol] = []
        #if (canImport(UIKit) && !os(watchOS)) || os(Linux)
        if let lifecycle {
            let center = NotificationCenter.default
            observers.append(center.addObserver(forName: UIApplication.willEnterForegroundNotification, object: nil,
                                                queue: nil) { _ in Task { await lifecycle.foreground() } })
            // queue nil, then the main actor: on Linux an observer on `OperationQueue.main` leaks (LeakSanitizer).
            observers.append(center.addObserver(forName: UIApplication.didEnterBackgroundNotification, object: nil,
                                                queue: nil) { _ in
                Task { @MainActor in BackgroundTask.run(named: "wimz.relay-client.close", lifecycle.background) }
            })
        }
        #endif
        return Watchers(monitor: monitor, paths: paths, observers: observers)
        #else
        return nil
        #endif
    }

    #if canImport(Network) || os(Linux)
    final class Watchers: @unchecked Sendable {
        let monitor: NWPathMonitor
        let paths: PathChangeWatch
        let observers: [any NSObjectProtocol]
        init(monitor: NWPathMonitor, paths: PathChangeWatch, observers: [any NSObjectProtocol]) {
            self.monitor = monitor
            self.paths = paths
            self.observers = observers
        }
        deinit {
            monitor.cancel()
            for observer in observers { NotificationCenter.default.removeObserver(observer) }
        }
    }
    #endif
}

#if (canImport(UIKit) && !os(watchOS)) || os(Linux)
/// Work the app asks iOS to let finish after it left the foreground (`beginBackgroundTask`): the
/// task ends when the work does, or when iOS says time is up.
@MainActor final class BackgroundTask {
    private var identifier = UIBackgroundTaskIdentifier.invalid

    static func run(named name: String, _ work: @escaping @Sendable () async -> Void) {
        let task = BackgroundTask()
        task.identifier = UIApplication.shared.beginBackgroundTask(withName: name) { task.end() }
        Task { @MainActor in
            await work()
            task.end()
        }
    }

    private func end() {
        guard identifier != .invalid else { return }
        UIApplication.shared.endBackgroundTask(identifier)
        identifier = .invalid
    }
}
#endif

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
// notification names `nonisolated`. Each names the declarations it mirrors. Nothing here ever
// fires: on Linux no path changes, no app leaves or enters the foreground, and a background task
// is never granted (`beginBackgroundTask` answers `.invalid`).

/// Network's path monitor, inert, mirroring `final public class NWPathMonitor` (Network): `final public
/// var pathUpdateHandler: ((_ newPath: NWPath) -> Void)?` (`@preconcurrency`, `@Sendable`), `public
/// init()`, `final public func start(queue: DispatchQueue)`, `final public func cancel()`.
package final class NWPathMonitor {
    @preconcurrency package final var pathUpdateHandler: (@Sendable (NWPath) -> Void)?
    package init() {}
    package final func start(queue: DispatchQueue) {}
    package final func cancel() {}
}

/// What the watchers read of `public struct NWPath : Equatable, Sendable` (Network): `public let
/// status: NWPath.Status` (`satisfied`, `unsatisfied`, `requiresConnection`), `public let
/// availableInterfaces: [NWInterface]`.
package struct NWPath: Sendable {
    package enum Status: Sendable, Equatable { case satisfied, unsatisfied, requiresConnection }
    package var status: Status
    package var availableInterfaces: [NWInterface]
}

/// What the watchers read of `public struct NWInterface : Hashable, Sendable` (Network): `public let
/// name: String`, the BSD name (`en0`, `pdp_ip0`).
package struct NWInterface: Sendable {
    package var name: String
}

/// UIKit's application, mirroring `@MainActor class UIApplication : UIResponder` (UIKit): `class
/// var shared: UIApplication { get }`; `nonisolated class let willEnterForegroundNotification:
/// NSNotification.Name` and `didEnterBackgroundNotification`; `func beginBackgroundTask(withName
/// taskName: String?, expirationHandler handler: (@MainActor @Sendable () -> Void)? = nil) ->
/// UIBackgroundTaskIdentifier`; `func endBackgroundTask(_ identifier: UIBackgroundTaskIdentifier)`.
@MainActor package final class UIApplication {
    package static let shared = UIApplication()
    package nonisolated static let willEnterForegroundNotification = Notification.Name("UIApplicationWillEnterForegroundNotification")
    package nonisolated static let didEnterBackgroundNotification = Notification.Name("UIApplicationDidEnterBackgroundNotification")
    package func beginBackgroundTask(withName taskName: String?,
                                     expirationHandler handler: (@MainActor @Sendable () -> Void)? = nil) -> UIBackgroundTaskIdentifier {
        .invalid
    }
    package func endBackgroundTask(_ identifier: UIBackgroundTaskIdentifier) {}
}

/// Mirrors `struct UIBackgroundTaskIdentifier : RawRepresentable, Sendable` (UIKit): `init(rawValue: Int)`,
/// `static let invalid: UIBackgroundTaskIdentifier`.
package struct UIBackgroundTaskIdentifier: RawRepresentable, Hashable, Sendable {
    package var rawValue: Int
    package init(rawValue: Int) { self.rawValue = rawValue }
    package static let invalid = UIBackgroundTaskIdentifier(rawValue: 0)
}
#endif
