// swift-tools-version:6.0
import PackageDescription

/// The forwarding path's targets skip runtime exclusivity checks in release builds: they cost
/// ~7 % of fan-out CPU (perf), and debug builds (the test suite) keep them on.
let hotPath: [SwiftSetting] = [.unsafeFlags(["-enforce-exclusivity=unchecked"], .when(configuration: .release))]

/// The app libraries' products, from the package in clients/swift.
let wimzProtocol: Target.Dependency = .product(name: "WimzProtocol", package: "wimz-relay-client")
let wimzRelayClient: Target.Dependency = .product(name: "WimzRelayClient", package: "wimz-relay-client")
let wimzRobot: Target.Dependency = .product(name: "WimzRobot", package: "wimz-relay-client")
let wimzSealed: Target.Dependency = .product(name: "WimzSealed", package: "wimz-relay-client")

/// wimz-relay: the WIM-Z cloud relay and TURN-credential service.
///
/// Each C library is wrapped by exactly one Swift target:
///   CLibWebSockets -> RelayServer, COpenSSL -> RelayCrypto, CLibPQ -> RelayStore.
let package = Package(
    name: "wimz-relay",
    platforms: [.macOS(.v14), .iOS(.v17)],
    products: [
        .executable(name: "wimz-relay", targets: ["wimz-relay"]),
        .executable(name: "wimz-bench", targets: ["wimz-bench"]),
        .executable(name: "wimz-app-demo", targets: ["wimz-app-demo"]),
    ],
    dependencies: [
        .package(url: "https://github.com/apple/swift-argument-parser", from: "1.5.0"),
        .package(url: "https://github.com/apple/swift-log", from: "1.6.0"),
        // /metrics (RelayServer); swift-metrics only in wimz-bench's metrics-cost comparison.
        .package(url: "https://github.com/apple/swift-metrics", from: "2.5.0"),
        .package(url: "https://github.com/swift-server/swift-prometheus", from: "2.0.0"),
        // The app libraries (WimzRelayClient, WimzRobot) and the protocol's names (WimzProtocol):
        // a package of their own, so an app depending on them resolves none of the daemon's.
        .package(name: "wimz-relay-client", path: "clients/swift"),
        // RelayPush's HTTP/2 client runs on NIO; no other daemon target imports it.
        .package(url: "https://github.com/apple/swift-nio", from: "2.81.0"),
        .package(url: "https://github.com/apple/swift-nio-ssl", from: "2.29.0"),
        // The push sender's HTTP/2 client (RelayPush, a worker of its own: never the service thread).
        .package(url: "https://github.com/swift-server/async-http-client", from: "1.37.0"),
        // The sealed household's tests play the robot with CryptoKit's API (the app library's own crypto).
        .package(url: "https://github.com/apple/swift-crypto", "3.12.0"..<"5.0.0"),
    ],
    targets: [
        // System libraries (Debian: libwebsockets-dev, libpq-dev, libssl-dev).
        .systemLibrary(
            name: "CLibWebSockets", pkgConfig: "libwebsockets",
            providers: [.apt(["libwebsockets-dev"])]),
        .systemLibrary(
            name: "CLibPQ", pkgConfig: "libpq",
            providers: [.apt(["libpq-dev"])]),
        .systemLibrary(
            name: "COpenSSL", pkgConfig: "openssl",
            providers: [.apt(["libssl-dev"])]),
        // Linux epoll, for the benchmark's load generator only.
        .systemLibrary(name: "CEpoll"),
        // The executable's argv from glibc, for when /proc (where Swift reads it) is not mounted.
        .target(name: "CProcessArguments"),
        // The package version scripts/package.sh stamps into its build (RelayBuild.version).
        .target(name: "CBuildStamp"),

        // Pure Swift: rules, registry, parsing. No C module.
        // Optimised in debug builds too, so the test suite's allocation test measures the
        // forwarding code as it ships (unoptimised generic code allocates where -O does not).
        .target(name: "RelayCore", dependencies: [wimzProtocol], swiftSettings: hotPath + [.unsafeFlags(["-O"], .when(configuration: .debug))]),
        .target(name: "RelayCrypto", dependencies: ["COpenSSL", "RelayCore"]),
        // Invariants for the libFuzzer targets (scripts/fuzz.sh) and their regression tests.
        .target(name: "RelayFuzzChecks", dependencies: ["RelayCore"]),
        // swift-log's handler for the relay's JSON lines (token redaction included).
        .target(name: "RelayLogging", dependencies: ["RelayCore", .product(name: "Logging", package: "swift-log")]),
        // The database and nothing else: connection, repositories, migrations, notification grammar.
        .target(name: "RelayStore", dependencies: ["CLibPQ", wimzProtocol, "RelayCore", "RelayCrypto"]),
        // The threads that talk to the database for the relay (store monitor, cluster agent, audit
        // writer, admin jobs), all on one `DatabaseThread` with one reconnect policy.
        .target(name: "RelayWorkers", dependencies: [wimzProtocol, "RelayCore", "RelayStore", "RelayLogging",
                                                      .product(name: "Logging", package: "swift-log")]),
        // APNs (docs/protocol.md v1.2 push): the provider token and the HTTP/2 sender, on a worker of its
        // own fed through a bounded queue. The only target that uses SwiftNIO in the daemon.
        .target(name: "RelayPush", dependencies: ["RelayCore", "RelayCrypto", .product(name: "Logging", package: "swift-log"),
                                                   .product(name: "AsyncHTTPClient", package: "async-http-client"),
                                                   .product(name: "NIOSSL", package: "swift-nio-ssl"),
                                                   .product(name: "NIOCore", package: "swift-nio"),
                                                   .product(name: "NIOPosix", package: "swift-nio")]),
        .target(name: "RelayServer", dependencies: ["CLibWebSockets", "CEpoll", "CBuildStamp", wimzProtocol, "RelayCore", "RelayCrypto", "RelayStore",
                                                     "RelayWorkers", "RelayLogging", "RelayPush", .product(name: "Logging", package: "swift-log"),
                                                     .product(name: "Prometheus", package: "swift-prometheus")],
                swiftSettings: hotPath),
        .executableTarget(
            name: "wimz-relay",
            dependencies: [
                "CProcessArguments", "RelayCore", "RelayCrypto", "RelayStore", "RelayServer", "RelayLogging", wimzProtocol,
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
                .product(name: "Logging", package: "swift-log"),
            ]),
        .executableTarget(
            name: "wimz-bench",
            dependencies: ["CEpoll", wimzProtocol, wimzSealed, "RelayCore", "RelayStore", .product(name: "ArgumentParser", package: "swift-argument-parser"),
                           .product(name: "CoreMetrics", package: "swift-metrics"),
                           .product(name: "Prometheus", package: "swift-prometheus")],
            // Built as the relay's forwarding path is (its loops and the metrics-cost comparison).
            swiftSettings: hotPath),

        // A terminal app on WimzRobot: the live mission, the device's state, TURN expiry.
        .executableTarget(
            name: "wimz-app-demo",
            dependencies: [wimzRelayClient, wimzRobot, wimzSealed, .product(name: "ArgumentParser", package: "swift-argument-parser")]),

        // Tests. Store and server tests need WIMZ_TEST_DATABASE_URL (set by scripts/test.sh).
        .target(name: "RelayTestSupport", dependencies: [wimzProtocol, "RelayCore", "RelayCrypto", "RelayStore"], path: "Tests/RelayTestSupport"),
        // Counts the test process's heap allocations (the forwarding-path allocation test).
        .target(name: "MallocCounter", path: "Tests/MallocCounter"),
        .testTarget(name: "RelayCoreTests", dependencies: ["RelayCore", "RelayFuzzChecks", "MallocCounter", wimzProtocol]),
        .testTarget(name: "RelayCryptoTests", dependencies: ["RelayCrypto", "RelayCore"]),
        .testTarget(name: "RelayStoreTests", dependencies: ["RelayStore", "RelayTestSupport"]),
        .testTarget(name: "RelayWorkersTests", dependencies: ["RelayWorkers", "RelayStore", "RelayCrypto", "RelayLogging", "RelayTestSupport",
                                                              .product(name: "Logging", package: "swift-log")]),
        // The client libraries' pure parts (models, push payloads, back-off, URLs): no relay, no database.
        .testTarget(name: "WimzRelayClientUnitTests", dependencies: [wimzRelayClient, wimzProtocol, wimzSealed]),
        .testTarget(name: "WimzRobotTests", dependencies: [wimzRobot, wimzRelayClient]),
        // The sealed household's bytes against vectors computed from the primitives (Tests/Fixtures/sealed).
        .testTarget(name: "WimzSealedTests", dependencies: [wimzSealed]),
        // The client against the real relay.
        .testTarget(name: "WimzRelayClientTests", dependencies: [wimzRelayClient, wimzRobot, wimzSealed, "RelayCore", "RelayStore", "RelayTestSupport",
                                                                  .product(name: "Crypto", package: "swift-crypto")]),
        // In-process: the router, authentication and handlers with fake clients, a fake loop and a
        // clock the test moves; no socket, no database.
        .testTarget(name: "RelayServerTests", dependencies: ["RelayServer", "RelayCore", "RelayCrypto", "RelayStore", "RelayWorkers", "RelayTestSupport"]),
        // The daemon as built, spawned against the test command's PostgreSQL, over loopback.
        .testTarget(name: "RelayIntegrationTests", dependencies: ["RelayServer", "RelayCore", "RelayCrypto", "RelayStore", "RelayTestSupport", "wimz-relay"]),
    ]
)
