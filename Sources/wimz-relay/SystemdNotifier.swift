import Foundation

#if canImport(Glibc)
import Glibc
#endif

/// sd_notify(3) without libsystemd: datagrams to `$NOTIFY_SOCKET` (a path, or `@name` for an
/// abstract socket). A no-op when the variable is unset (not started by systemd).
final class SystemdNotifier: @unchecked Sendable {
    private let path: String?
    /// Half of `$WATCHDOG_USEC`, when systemd asked for watchdog pings.
    let watchdogInterval: UInt64?
    private var lastWatchdog: UInt64 = 0

    init(environment: [String: String] = ProcessInfo.processInfo.environment) {
        path = environment["NOTIFY_SOCKET"].flatMap { $0.isEmpty ? nil : $0 }
        watchdogInterval = environment["WATCHDOG_USEC"].flatMap { UInt64($0) }.map { $0 * 1000 / 2 }
    }

    func ready() { send("READY=1\nSTATUS=serving") }
    func stopping() { send("STOPPING=1\nSTATUS=stopping") }

    /// Sends WATCHDOG=1 when half the watchdog period has passed (call from the service loop).
    func watchdogTick(nowNanos: UInt64) {
        guard let watchdogInterval, nowNanos - lastWatchdog >= watchdogInterval else { return }
        lastWatchdog = nowNanos
        send("WATCHDOG=1")
    }

    private func send(_ message: String) {
        guard let path else { return }
        let fd = socket(AF_UNIX, Int32(SOCK_DGRAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        guard fd >= 0 else { return }
        defer { close(fd) }
        var addr = sockaddr_un()
        addr.sun_family = sa_family_t(AF_UNIX)
        var bytes = Array(path.utf8)
        if bytes.first == UInt8(ascii: "@") { bytes[0] = 0 }  // abstract namespace
        guard bytes.count < MemoryLayout.size(ofValue: addr.sun_path) else { return }
        withUnsafeMutableBytes(of: &addr.sun_path) { raw in
            for (i, b) in bytes.enumerated() { raw[i] = b }
        }
        let length = socklen_t(MemoryLayout<sa_family_t>.size + bytes.count)
        _ = Array(message.utf8).withUnsafeBytes { payload in
            withUnsafePointer(to: &addr) {
                $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                    sendto(fd, payload.baseAddress, payload.count, Int32(MSG_NOSIGNAL), $0, length)
                }
            }
        }
    }
}
