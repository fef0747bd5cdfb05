import CEpoll

#if canImport(Glibc)
import Glibc
#endif

/// Removes from libev's epoll set a descriptor the gate is about to close while a duplicate
/// of it lives on (the handover to lws).
///
/// epoll registers an open file, not a descriptor number: closing the gate's descriptor does
/// not remove its registration while the duplicate keeps the connection open, and the
/// connection's next event then reaches libev under a number it has let go. libev treats that
/// as a spurious notification and rebuilds its whole epoll set — closing it and adding every
/// descriptor again, ~85 ms of the service thread with 19,000 sockets (perf: `ep_clear_and_put`,
/// `do_epoll_ctl`), seen as a one-off p99.9 of 50–90 ms some seconds after a burst of connects.
/// libev never deletes registrations itself (it relies on `close`) and has no call that gives
/// its descriptor, so it is found once among the process's eventpoll descriptors: the one that
/// already holds the listening socket.
struct EventLoopRegistration {
    private var pollDescriptor: Int32 = -1
    /// The loop was looked for once and has no epoll set (lws's poll loop): every later call
    /// would scan the process's descriptors again for nothing.
    private var loopHasNoEpollSet = false

    /// Takes `fd` out of the event loop's epoll set (nothing when the loop is not epoll-based).
    mutating func remove(_ fd: Int32, listener: Int32) {
        if pollDescriptor < 0 {
            guard !loopHasNoEpollSet, listener >= 0 else { return }
            pollDescriptor = Self.findLoopPoll(holding: listener)
            loopHasNoEpollSet = pollDescriptor < 0
        }
        guard pollDescriptor >= 0 else { return }
        if epoll_ctl(pollDescriptor, EPOLL_CTL_DEL, fd, nil) != 0, errno == EBADF || errno == EINVAL {
            // libev made a new set (it does after errors): find it again.
            pollDescriptor = Self.findLoopPoll(holding: listener)
            if pollDescriptor >= 0 { _ = epoll_ctl(pollDescriptor, EPOLL_CTL_DEL, fd, nil) }
        }
    }

    /// The eventpoll descriptor in which `listener` is registered: adding it again fails with
    /// EEXIST there (and is undone anywhere it succeeds).
    private static func findLoopPoll(holding listener: Int32) -> Int32 {
        guard listener >= 0, let directory = opendir("/proc/self/fd") else { return -1 }
        defer { closedir(directory) }
        var target = [CChar](repeating: 0, count: 64)
        while let entry = readdir(directory) {
            let name = withUnsafeBytes(of: entry.pointee.d_name) { String(decoding: $0.prefix { $0 != 0 }, as: UTF8.self) }
            guard let fd = Int32(name) else { continue }
            let length = readlink("/proc/self/fd/\(fd)", &target, target.count - 1)
            guard length > 0, String(decoding: target[..<length].map { UInt8(bitPattern: $0) }, as: UTF8.self) == "anon_inode:[eventpoll]"
            else { continue }
            var event = epoll_event(events: EPOLLIN.rawValue, data: epoll_data_t(fd: listener))
            if epoll_ctl(fd, EPOLL_CTL_ADD, listener, &event) == 0 {
                _ = epoll_ctl(fd, EPOLL_CTL_DEL, listener, nil)  // not the loop's set
            } else if errno == EEXIST {
                return fd
            }
        }
        return -1
    }
}
