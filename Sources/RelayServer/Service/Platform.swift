import CLibWebSockets
import Logging
import RelayCore

#if canImport(Glibc)
import Glibc
#endif

/// TCP_CORK on a socket: while it is on, the kernel holds back partial segments, so what is
/// written until it goes off leaves together (the gate corks each upgrade it hands to lws, the
/// WebSocket endpoint uncorks after the connection's first message).
enum TCPCork {
    static func set(_ fd: Int32, _ on: Bool) {
        var value: Int32 = on ? 1 : 0
        setsockopt(fd, Int32(IPPROTO_TCP), TCP_CORK, &value, socklen_t(MemoryLayout<Int32>.size))
    }
}

/// This host's name (the default node id and address are `hostname:port`).
enum HostName {
    static func current() -> String {
        var buffer = [CChar](repeating: 0, count: 256)
        guard gethostname(&buffer, buffer.count - 1) == 0 else { return "localhost" }
        let name = String(decoding: buffer.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)
        return name.isEmpty ? "localhost" : name
    }
}

/// lws sizes its fd table from RLIMIT_NOFILE and finds a socket's state by direct index only
/// while `fd_limit_per_thread` is not below it, so the soft limit is set to what the relay may
/// hold (`WIMZ_MAX_DESCRIPTORS`, at most the hard limit) and lws is handed that value. Set, not
/// only raised: lws 4.1.6 (Debian's build keeps its debug checks) scans the whole table at every
/// close, so a table sized by a unit's LimitNOFILE=262144 would cost ~1.2 ms a close.
///
/// The kernel's own descriptor table is grown to that size at once, too. It starts at 64 and
/// doubles as descriptors are opened, and in a process with threads each growth waits for an RCU
/// grace period (`expand_fdtable` calls `synchronize_rcu`): 12–16 ms here with the service thread
/// blocked in `accept4`, eight times over while a fresh process takes 16,000 sockets back —
/// exactly when every client of a restarted node reconnects (docs/performance.md, session 36).
/// The table never shrinks, so a process that has held its peak once never waits again; this
/// makes a fresh one the same. It costs the kernel 8 bytes and two bits a descriptor.
enum FileDescriptorLimit {
    static func set(wanted: Int) -> Int {
        var limit = rlimit()
        guard getrlimit(Int32(RLIMIT_NOFILE.rawValue), &limit) == 0 else { return 1024 }
        let target = min(rlim_t(max(wanted, 0)), limit.rlim_max)
        if limit.rlim_cur != target {
            limit.rlim_cur = target
            _ = setrlimit(Int32(RLIMIT_NOFILE.rawValue), &limit)
            _ = getrlimit(Int32(RLIMIT_NOFILE.rawValue), &limit)
        }
        let descriptors = Int(min(limit.rlim_cur, 1 << 20))
        growKernelTable(to: descriptors)
        return descriptors
    }

    /// Opens a descriptor numbered `count - 1` (the lowest free one from there) and closes it:
    /// the kernel sizes the process's table to hold it, once.
    private static func growKernelTable(to count: Int) {
        guard count > 1 else { return }
        let source = open("/dev/null", O_RDONLY | O_CLOEXEC)
        guard source >= 0 else { return }
        let highest = fcntl(source, F_DUPFD_CLOEXEC, Int32(count - 1))
        if highest >= 0 { close(highest) }
        close(source)
    }
}

/// Sends lws's own warnings and errors through our JSON logger.
enum LWSLogBridge {
    static let log = Logger(label: "wimz.lws")
    /// The levels lws passes on (set once, on the service thread, before it runs).
    nonisolated(unsafe) private static var mask: Int32 = LLL_ERR | LLL_WARN

    static func install(level: LogLevel) {
        mask = LLL_ERR | LLL_WARN
        if level == .debug { mask |= LLL_NOTICE }
        lws_set_log_level(mask) { lwsLevel, line in
            guard let line else { return }
            var text = String(cString: line)
            while text.last == "\n" { text.removeLast() }
            let level: Logger.Level = lwsLevel == LLL_ERR ? .error : lwsLevel == LLL_WARN ? .warning : .debug
            LWSLogBridge.log.log(level: level, "lws", metadata: ["message": "\(text)"])
        }
    }

    /// Runs `body` with lws's logging off. lws 4.1.6 logs every adoption with a buffer at error
    /// level ("adopt_socket_readbuf: calling service"), formatting the line before any filter
    /// sees it; the gate adopts every upgrade that way, so its adoptions run through here and
    /// report a failure themselves (the adoption returns no connection).
    static func withoutLogs(_ body: () -> Void) {
        lws_set_log_level(0, nil)
        body()
        lws_set_log_level(mask, nil)
    }
}
