import CLibWebSockets
import Logging
import RelayCore

#if canImport(Glibc)
import Glibc
#endif

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
/// while `fd_limit_per_thread` is not below it, so raise the soft limit as far as the hard
/// limit allows and hand lws that value.
enum FileDescriptorLimit {
    static func raise(wanted: rlim_t = 1 << 20) -> Int {
        var limit = rlimit()
        guard getrlimit(Int32(RLIMIT_NOFILE.rawValue), &limit) == 0 else { return 1024 }
        if limit.rlim_cur < wanted {
            limit.rlim_cur = min(wanted, limit.rlim_max)
            _ = setrlimit(Int32(RLIMIT_NOFILE.rawValue), &limit)
            _ = getrlimit(Int32(RLIMIT_NOFILE.rawValue), &limit)
        }
        return Int(min(limit.rlim_cur, 1 << 20))
    }
}

/// Sends lws's own warnings and errors through our JSON logger.
enum LWSLogBridge {
    static let log = Logger(label: "wimz.lws")

    static func install(level: LogLevel) {
        var mask = LLL_ERR | LLL_WARN
        if level == .debug { mask |= LLL_NOTICE }
        lws_set_log_level(mask) { lwsLevel, line in
            guard let line else { return }
            // lws 4.1.6 logs every adoption with a buffer at error level; the gate adopts each
            // upgrade that way, so that line is routine here, not an error (checked on the C
            // string: this runs once per handshake).
            if strstr(line, "adopt_socket_readbuf: calling service") != nil { return }
            var text = String(cString: line)
            while text.last == "\n" { text.removeLast() }
            let level: Logger.Level = lwsLevel == LLL_ERR ? .error : lwsLevel == LLL_WARN ? .warning : .debug
            LWSLogBridge.log.log(level: level, "lws", metadata: ["message": "\(text)"])
        }
    }
}
