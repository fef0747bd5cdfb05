#if os(Linux)
import Foundation

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
