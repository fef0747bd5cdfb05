// swift-tools-version:6.0
import PackageDescription

/// The app's side of wimz-relay: what an iOS app (or a Linux tool) depends on, and nothing of
/// the daemon. On Apple platforms Foundation's URLSession carries the WebSocket, so no package is
/// built there; on Linux, where Debian's libcurl has no WebSocket support, SwiftNIO does.
///
/// The daemon's package depends on this one by path; the tools version is the oldest whose
/// language mode the code is written in (Swift 6, strict concurrency, no 6.1+ features).
let package = Package(
    name: "wimz-relay-client",
    platforms: [.macOS(.v14), .iOS(.v17)],
    products: [
        /// The app's side of the relay protocol: connect, reconnect, events, commands, TURN
        /// credentials, pairing, push, the last-known state.
        .library(name: "WimzRelayClient", targets: ["WimzRelayClient"]),
        /// The robot on top of it: the guide's models, typed events, its REST API (LAN or relay),
        /// the observable model a SwiftUI view binds to.
        .library(name: "WimzRobot", targets: ["WimzRobot"]),
        /// What every end of the protocol agrees on (close codes, paths, names, limits); the relay
        /// is built on the same module.
        .library(name: "WimzProtocol", targets: ["WimzProtocol"]),
        /// The sealed household (v1.5): identity keys, rosters, epoch secrets, sealed frames. No
        /// network, little memory: what a Notification Service Extension links to open a push.
        .library(name: "WimzSealed", targets: ["WimzSealed"]),
    ],
    dependencies: [
        .package(url: "https://github.com/apple/swift-nio", from: "2.81.0"),
        .package(url: "https://github.com/apple/swift-nio-ssl", from: "2.29.0"),
        // CryptoKit's API (HPKE, Curve25519, ChaChaPoly, HKDF); on Apple platforms CryptoKit itself.
        .package(url: "https://github.com/apple/swift-crypto", "3.12.0"..<"5.0.0"),
    ],
    targets: [
        // No dependencies.
        .target(name: "WimzProtocol"),
        // Foundation plus a WebSocket transport: URLSessionWebSocketTask on Apple platforms,
        // SwiftNIO on Linux.
        .target(
            name: "WimzRelayClient",
            dependencies: [
                "WimzProtocol",
                "WimzSealed",
                .product(name: "NIOCore", package: "swift-nio", condition: .when(platforms: [.linux])),
                .product(name: "NIOPosix", package: "swift-nio", condition: .when(platforms: [.linux])),
                .product(name: "NIOHTTP1", package: "swift-nio", condition: .when(platforms: [.linux])),
                .product(name: "NIOWebSocket", package: "swift-nio", condition: .when(platforms: [.linux])),
                .product(name: "NIOSSL", package: "swift-nio-ssl", condition: .when(platforms: [.linux])),
            ]),
        // The sealed household's cryptography, on swift-crypto and the shared constants (no dependencies).
        .target(name: "WimzSealed", dependencies: ["WimzProtocol", .product(name: "Crypto", package: "swift-crypto")]),
        // What the app knows of the robot, on the relay client.
        .target(name: "WimzRobot", dependencies: ["WimzRelayClient", "WimzProtocol"]),
    ]
)
