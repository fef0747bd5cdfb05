// What Glibc's Swift module leaves out: IPPROTO_TCP and the TCP_* options (netinet's headers,
// through libwebsockets' module) and the socket types (sys/socket.h, through CEpoll's).
import CEpoll
import CLibWebSockets
import RelayCore

#if canImport(Glibc)
import Glibc
#endif

/// The TCP options that decide how soon a client's dead or returning link is noticed
/// (docs/operations.md "Cellular links"), from the settings: a cap on the retransmission
/// back-off, the user timeout and keepalive. Set once on the gate's listening socket, whose
/// connections inherit them (Linux copies a listener's socket options to each connection it
/// accepts), or, with TLS served by lws, on each connection lws accepts.
struct TCPLiveness {
    /// Linux 6.15's TCP_RTO_MAX_MS (Debian 12's headers predate it).
    static let retransmitCapOption: Int32 = 44

    /// One option and the value it is set to.
    struct Option {
        let name: String
        let level: Int32
        let option: Int32
        let value: Int32
    }

    /// What the kernel refused to set, and why (an older kernel has no TCP_RTO_MAX_MS).
    struct Refusal {
        let option: String
        let reason: String
    }

    let options: [Option]

    init(_ configuration: RelayConfiguration) {
        let tcp = Int32(IPPROTO_TCP)
        var options = [Option(name: "TCP_RTO_MAX_MS", level: tcp, option: TCPLiveness.retransmitCapOption,
                              value: Int32((configuration.tcpRetransmitCapSeconds * 1000).rounded()))]
        if configuration.tcpUserTimeoutSeconds > 0 {
            options.append(Option(name: "TCP_USER_TIMEOUT", level: tcp, option: TCP_USER_TIMEOUT,
                                  value: Int32(configuration.tcpUserTimeoutSeconds * 1000)))
        }
        let idle = Int32(configuration.tcpKeepaliveSeconds)
        if idle > 0 {
            // Four probes a quarter of the quiet apart: a dead peer is found two quiets after its
            // last word, as the relay's ping rule finds it (the user timeout ends probing too).
            options += [Option(name: "SO_KEEPALIVE", level: SOL_SOCKET, option: SO_KEEPALIVE, value: 1),
                        Option(name: "TCP_KEEPIDLE", level: tcp, option: TCP_KEEPIDLE, value: idle),
                        Option(name: "TCP_KEEPINTVL", level: tcp, option: TCP_KEEPINTVL, value: max(1, idle / 4)),
                        Option(name: "TCP_KEEPCNT", level: tcp, option: TCP_KEEPCNT, value: 4)]
        }
        self.options = options
    }

    /// What the kernel refuses to set, tried on a socket of its own (TLS served by lws: the
    /// connections are lws's, and a refusal is said once at start, not per connection).
    func refusals() -> [Refusal] {
        let fd = socket(AF_INET6, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        guard fd >= 0 else { return [Refusal(option: "socket", reason: String(cString: strerror(errno)))] }
        defer { close(fd) }
        return apply(to: fd)
    }

    /// Sets every option on `fd`; what the kernel refused.
    @discardableResult
    func apply(to fd: Int32) -> [Refusal] {
        options.compactMap { option in
            var value = option.value
            guard setsockopt(fd, option.level, option.option, &value, socklen_t(MemoryLayout<Int32>.size)) != 0 else { return nil }
            return Refusal(option: option.name, reason: String(cString: strerror(errno)))
        }
    }
}
