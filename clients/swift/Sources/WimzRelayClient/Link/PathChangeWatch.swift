import Foundation
#if canImport(Network)
import Network
#endif

/// A network path as far as a socket cares: whether it can carry traffic, and over which
/// interface (`en0`, `pdp_ip0`, …).
package struct NetworkPathSnapshot: Equatable, Sendable {
    package var usable: Bool
    package var interface: String?

    package init(usable: Bool, interface: String?) {
        self.usable = usable
        self.interface = interface
    }

    #if canImport(Network) || os(Linux)
    package init(_ path: NWPath) {
        self.init(usable: path.status == .satisfied, interface: path.availableInterfaces.first?.name)
    }
    #endif
}

/// Turns a phone's network path updates into reconnects (the relay client's socket, RobotAPI's
/// choice of route). Updates come in bursts (Wi-Fi ↔
/// cellular gives several within a second) and most carry attribute changes only (expensive,
/// constrained, DNS): the path is judged once it has settled, and only a path that became usable,
/// or moved to another interface, makes the socket stale. The first path seen is the current
/// one, not a change.
package final class PathChangeWatch: Sendable {
    private struct State {
        var judged: NetworkPathSnapshot?
        var latest: NetworkPathSnapshot?
        var pending: Task<Void, Never>?
    }
    private let state = Locked(State())
    private let settle: Duration
    private let clock: RelayClientClock
    private let reconnect: @Sendable () async -> Void

    package init(settle: Duration = .milliseconds(500), clock: RelayClientClock = .continuous,
                 reconnect: @escaping @Sendable () async -> Void) {
        self.settle = settle
        self.clock = clock
        self.reconnect = reconnect
    }

    /// A path update, from any thread. Returns its judgment: it ends once the path has settled
    /// and was judged (and the reconnect it asked for made), or at once when a later update took
    /// its place.
    @discardableResult
    package func update(_ path: NetworkPathSnapshot) -> Task<Void, Never> {
        let settle = self.settle, clock = self.clock
        let next = Task { [weak self] in
            do { try await clock.sleep(settle) } catch { return }
            guard !Task.isCancelled, let self, self.settled() else { return }
            await self.reconnect()
        }
        state.withLock { state in
            state.latest = path
            state.pending?.cancel()
            state.pending = next
        }
        return next
    }

    /// Judges the settled path against the one judged before: true when the socket is stale.
    private func settled() -> Bool {
        state.withLock { state in
            guard let latest = state.latest else { return false }
            defer { state.judged = latest }
            guard let judged = state.judged else { return false }
            return latest.usable && (!judged.usable || latest.interface != judged.interface)
        }
    }

    deinit { state.withLock { $0.pending?.cancel() } }
}
