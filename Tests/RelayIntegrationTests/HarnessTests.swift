import Foundation
import Testing
import RelayTestSupport

/// Guarantees of the test harness itself that other tests' verdicts rest on.
@Suite struct HarnessTests {
    /// Tests run in parallel in one process. A child one test spawns (a relay, coturn) must hold
    /// no descriptor of another's: an inherited client socket would keep that test's connection
    /// open after it closed it, and the relay would never see it go.
    @Test func aSpawnedChildInheritsOnlyItsStandardDescriptors() throws {
        let f = try RelayFixture()
        let client = try TestSocket(port: f.port)
        let child = try ChildProcess(["/bin/sleep", "30"], environment: [:])
        defer { kill(child.pid, SIGKILL) }
        // posix_spawn returns once exec has begun, while the dynamic loader may still hold a
        // library open as descriptor 3; look once sleep is asleep, its start-up over.
        let asleep = Date().addingTimeInterval(10)
        while (try? String(contentsOfFile: "/proc/\(child.pid)/wchan", encoding: .utf8)) != "hrtimer_nanosleep", Date() < asleep {
            usleep(2_000)
        }
        let open = try FileManager.default.contentsOfDirectory(atPath: "/proc/\(child.pid)/fd").compactMap(Int.init).sorted()
        #expect(open == [0, 1, 2], "the child holds \(open) (the test's client socket is \(client.fd))")
    }
}
