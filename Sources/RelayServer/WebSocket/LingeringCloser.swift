import CEpoll
import RelayCore

#if canImport(Glibc)
import Glibc
#endif

/// Keeps a socket the relay closed open for a few seconds after lws lets go of it, reading and
/// dropping what the peer still sends, so that the close frame, and everything queued before
/// it, reaches the peer.
///
/// lws 4.1 closes a socket as soon as its close handshake is over or given up (its staged
/// shutdown is never reached, and on libev not even asked for), and Linux answers a `close()`
/// with unread input, or input that arrives after it, with a reset that throws away whatever
/// the peer has not received yet. Such input is common: the pong to a ping the peer reads from
/// its backlog, a replaced robot's next event, an app's next command. The peer then never sees
/// its 4008, 4001 or 4003 and reconnects by the wrong rule (a CI run caught a slow app's 4008
/// lost this way). So, as web servers do it: a duplicate holds the socket open, writes end
/// with a FIN after the data, and input is drained until the peer closes or `grace` passes.
///
/// Service thread only: ticked by the session wheel, with a non-blocking look at its own
/// epoll set (no thread, no lock). It owns its epoll descriptor and every duplicate it holds.
final class LingeringCloser {
    static let grace: UInt64 = 5_000_000_000
    /// Most sockets lingering at once. Past it a close is plain, as lws makes it: a stop that
    /// closes 20,000 sockets must not hold 20,000 more descriptors.
    static let capacity = 1024
    /// Reads of one socket per tick: a peer that keeps sending cannot hold the service thread.
    static let readsPerTick = 8

    private struct Lingering {
        var fd: Int32
        var deadline: UInt64
    }

    private let poll: Int32
    /// Takes a descriptor out of the event loop's epoll set before lws closes it (see
    /// `EventLoopRegistration`): the duplicate keeps the socket, and with it the registration, alive.
    private let removeFromLoop: (Int32) -> Void
    /// Each lingering duplicate and its deadline. The deadline tells a descriptor number that
    /// was closed and reused apart from the entry in `deadlines` that named it first.
    private var lingering: [Int32: UInt64] = [:]
    private var deadlines = DeadlineFIFO<Lingering>()
    private var events = [epoll_event](repeating: epoll_event(), count: 64)
    private let scratch = UnsafeMutableRawBufferPointer.allocate(byteCount: 16_384, alignment: 1)

    init(removeFromLoop: @escaping (Int32) -> Void) {
        poll = epoll_create1(Int32(EPOLL_CLOEXEC))
        self.removeFromLoop = removeFromLoop
    }

    deinit {
        for fd in lingering.keys { close(fd) }
        if poll >= 0 { close(poll) }
        scratch.deallocate()
    }

    /// Sockets lingering now.
    var count: Int { lingering.count }

    /// Keeps the socket of `fd`, which lws is about to close, until its peer closes or `grace`
    /// passes. Without room (the cap, out of descriptors) the close stays plain.
    func take(_ fd: Int32, now: UInt64) {
        guard poll >= 0, lingering.count < Self.capacity else { return }
        let duplicate = fcntl(fd, F_DUPFD_CLOEXEC, 0)
        guard duplicate >= 0 else { return }
        var event = epoll_event(events: EPOLLIN.rawValue | EPOLLRDHUP.rawValue, data: epoll_data_t(fd: duplicate))
        guard epoll_ctl(poll, EPOLL_CTL_ADD, duplicate, &event) == 0 else {
            close(duplicate)
            return
        }
        removeFromLoop(fd)
        // The FIN goes after whatever the kernel still holds for the peer (the close frame last).
        shutdown(duplicate, Int32(SHUT_WR))
        let deadline = now + Self.grace
        lingering[duplicate] = deadline
        deadlines.append(Lingering(fd: duplicate, deadline: deadline), deadline: deadline)
    }

    /// Drops what lingering peers sent, closes those that closed, and those past their grace.
    func tick(now: UInt64) {
        guard !lingering.isEmpty else { return }
        let ready = Int(epoll_wait(poll, &events, Int32(events.count), 0))
        for k in 0..<max(ready, 0) { drain(events[k].data.fd) }
        for entry in deadlines.popExpired(now: now) where lingering[entry.fd] == entry.deadline { release(entry.fd) }
    }

    private func drain(_ fd: Int32) {
        guard lingering[fd] != nil else { return }
        for _ in 0..<Self.readsPerTick {
            let n = recv(fd, scratch.baseAddress, scratch.count, Int32(MSG_DONTWAIT))
            if n > 0 { continue }
            if n < 0, errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR { return }
            release(fd)  // 0: the peer closed too; an error: the connection is gone
            return
        }
    }

    /// Closing the last descriptor of the socket also takes it out of `poll`.
    private func release(_ fd: Int32) {
        lingering[fd] = nil
        close(fd)
    }
}
