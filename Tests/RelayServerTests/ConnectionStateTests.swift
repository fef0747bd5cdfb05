@testable import RelayServer
import Testing

/// A connection's state machine on its own: each transition's result and the state it leaves.
/// (Over the endpoint: WebSocketEndpointTests.)
@Suite struct ConnectionStateTests {
    typealias State = Connection.State

    /// The state after `transition`, and what the transition returned.
    private func after<Result>(_ state: State, _ transition: (inout State) -> Result) -> (State, Result) {
        var state = state
        let result = transition(&state)
        return (state, result)
    }

    @Test func nothingIsAskedForWhileOpeningThenWritesUncorkOnce() {
        #expect(after(.opening) { $0.writeRequested(closing: false) } == (.opening, .none))
        // The first messages follow at once, the close among them.
        #expect(after(.opening) { $0.writeRequested(closing: true) } == (.opening, .none))
        #expect(after(.opening) { $0.opened() }.0 == .open(corked: true))
        #expect(after(.open(corked: true)) { $0.writeRequested(closing: false) } == (.open(corked: true), .askWritable))
        #expect(after(.open(corked: true)) { $0.writeable(closing: false) } == (.open(corked: false), .drain(.yes)))
        #expect(after(.open(corked: false)) { $0.writeable(closing: false) } == (.open(corked: false), .drain(.no)))
    }

    @Test func aDirectFirstWriteUncorksOnce() {
        #expect(after(.open(corked: true)) { $0.wroteDirectly() } == (.open(corked: false), .yes))
        #expect(after(.open(corked: false)) { $0.wroteDirectly() } == (.open(corked: false), .no))
    }

    @Test func aCloseIsWatchedOnceLetOutThenLingers() {
        #expect(after(.open(corked: false)) { $0.writeRequested(closing: true) } == (.closeWaiting(corked: false), .watchClose))
        #expect(State.closeWaiting(corked: false).awaitsCloseRelease)
        // Already in the close watch.
        #expect(after(.closeWaiting(corked: false)) { $0.writeRequested(closing: true) } == (.closeWaiting(corked: false), .none))
        #expect(after(.closeWaiting(corked: false)) { $0.writeable(closing: true) } == (.closeLetOut, .sendClose(.no)))
        #expect(!State.closeLetOut.awaitsCloseRelease)
        // Our close frame went: the socket lingers.
        #expect(after(.closeLetOut) { $0.closed() } == (.finished, true))
    }

    @Test func aCloseBeforeAnyWriteLetsThe101OutWithIt() {
        #expect(after(.open(corked: true)) { $0.writeRequested(closing: true) } == (.closeWaiting(corked: true), .watchClose))
        #expect(after(.closeWaiting(corked: true)) { $0.writeable(closing: true) } == (.closeLetOut, .sendClose(.yes)))
    }

    @Test func aWriteableAskedForBeforeTheCloseSendsTheClose() {
        // The close was decided after the write was asked for, and before its WRITEABLE.
        #expect(after(.open(corked: false)) { $0.writeable(closing: true) } == (.closeLetOut, .sendClose(.no)))
    }

    @Test func aCloseThePeerBeganDoesNotLinger() {
        #expect(after(.open(corked: false)) { $0.closed() } == (.finished, false))
        #expect(after(.closeWaiting(corked: false)) { $0.closed() } == (.finished, false))
        #expect(State.finished.isFinished && !State.finished.awaitsCloseRelease)
    }

    #if DEBUG
    @Test func anImpossibleTransitionStopsADebugBuild() async {
        await #expect(processExitsWith: .failure) {
            var state = Connection.State.finished
            _ = state.closed()
        }
        await #expect(processExitsWith: .failure) {
            var state = Connection.State.opening
            _ = state.writeable(closing: false)
        }
    }
    #endif
}
