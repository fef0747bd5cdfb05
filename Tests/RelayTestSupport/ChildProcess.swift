import Foundation

/// A child process started with posix_spawn, its stdout+stderr on pipes, reaped with waitpid.
/// (Foundation's `Process` on Linux sometimes never notices a child's exit when many tests
/// spawn processes in parallel; this has no such machinery to go wrong.)
public final class ChildProcess: @unchecked Sendable {
    public let pid: pid_t
    /// Read ends of the child's stdout and stderr.
    public let stdoutFD: Int32
    public let stderrFD: Int32
    private var exitStatus: Int32?
    private let lock = NSLock()

    /// Spawns `arguments[0]` (a path) with exactly `environment`; stdin is /dev/null.
    /// `mergeStderr` sends stderr to the stdout pipe.
    public init(_ arguments: [String], environment: [String: String], mergeStderr: Bool = false) throws {
        var outPipe: [Int32] = [-1, -1]
        var errPipe: [Int32] = [-1, -1]
        guard pipe(&outPipe) == 0, pipe(&errPipe) == 0 else { throw TestSetupError("pipe() failed") }
        // Only the child's copies may survive exec; the parent's ends must not leak into other children.
        for fd in outPipe + errPipe { _ = fcntl(fd, F_SETFD, FD_CLOEXEC) }

        var actions = posix_spawn_file_actions_t()
        posix_spawn_file_actions_init(&actions)
        defer { posix_spawn_file_actions_destroy(&actions) }
        posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0)
        posix_spawn_file_actions_adddup2(&actions, outPipe[1], 1)
        posix_spawn_file_actions_adddup2(&actions, mergeStderr ? outPipe[1] : errPipe[1], 2)
        // Nothing else of this process's: tests run in parallel, and a child that inherited another
        // test's socket would hold its connection open after that test closed it.
        guard let closeFrom = ChildProcess.addCloseFrom else { throw TestSetupError("posix_spawn_file_actions_addclosefrom_np is missing (glibc < 2.34)") }
        _ = closeFrom(&actions, 3)

        var attributes = posix_spawnattr_t()
        posix_spawnattr_init(&attributes)
        defer { posix_spawnattr_destroy(&attributes) }
        // Children start with no signals blocked and default handlers.
        var none = sigset_t()
        sigemptyset(&none)
        posix_spawnattr_setsigmask(&attributes, &none)
        var defaults = sigset_t()
        sigfillset(&defaults)
        posix_spawnattr_setsigdefault(&attributes, &defaults)
        posix_spawnattr_setflags(&attributes, Int16(POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF))

        let argv: [UnsafeMutablePointer<CChar>?] = arguments.map { strdup($0) } + [nil]
        let envp: [UnsafeMutablePointer<CChar>?] = environment.map { strdup("\($0.key)=\($0.value)") } + [nil]
        defer { (argv + envp).forEach { free($0) } }
        var child: pid_t = 0
        let rc = posix_spawn(&child, arguments[0], &actions, &attributes, argv, envp)
        close(outPipe[1])
        close(errPipe[1])
        guard rc == 0 else {
            close(outPipe[0])
            close(errPipe[0])
            throw TestSetupError("cannot start \(arguments[0]): error \(rc)")
        }
        pid = child
        stdoutFD = outPipe[0]
        stderrFD = errPipe[0]
    }

    deinit {
        if status == nil {
            kill(pid, SIGKILL)
            _ = waitForExit()
        }
        close(stdoutFD)
        close(stderrFD)
    }

    /// glibc's `posix_spawn_file_actions_addclosefrom_np` (2.34+), which its header declares only
    /// under `_GNU_SOURCE`, hidden from Swift's Glibc module.
    private typealias AddCloseFrom = @convention(c) (UnsafeMutablePointer<posix_spawn_file_actions_t>, Int32) -> Int32
    private static let addCloseFrom: AddCloseFrom? = dlsym(nil, "posix_spawn_file_actions_addclosefrom_np")
        .map { unsafeBitCast($0, to: AddCloseFrom.self) }

    /// The exit status once reaped (128+signal for a signal), nil while running.
    public var status: Int32? {
        lock.lock()
        defer { lock.unlock() }
        if exitStatus == nil {
            var raw: Int32 = 0
            if waitpid(pid, &raw, WNOHANG) == pid { exitStatus = ChildProcess.decode(raw) }
        }
        return exitStatus
    }

    public var isRunning: Bool { status == nil }

    /// Blocks until the child exits.
    @discardableResult
    public func waitForExit() -> Int32 {
        if let s = status { return s }
        var raw: Int32 = 0
        while waitpid(pid, &raw, 0) < 0, errno == EINTR {}
        lock.lock()
        defer { lock.unlock() }
        exitStatus = exitStatus ?? ChildProcess.decode(raw)
        return exitStatus!
    }

    /// Reads `fd` to EOF.
    public static func readAll(_ fd: Int32) -> Data {
        var data = Data()
        var chunk = [UInt8](repeating: 0, count: 65536)
        while true {
            let n = read(fd, &chunk, chunk.count)
            if n > 0 { data.append(contentsOf: chunk[0..<n]); continue }
            if n < 0, errno == EINTR { continue }
            return data
        }
    }

    private static func decode(_ raw: Int32) -> Int32 {
        let signal = raw & 0x7f
        return signal == 0 ? (raw >> 8) & 0xff : 128 + signal
    }
}
