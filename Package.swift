// swift-tools-version:6.0
// clawvoice: a Linux voice node for OpenClaw gateways. See README.md and the design notes.
import PackageDescription

let package = Package(
    name: "clawvoice",
    platforms: [.macOS(.v14)],
    products: [
        .executable(name: "clawvoice", targets: ["clawvoice"]),
    ],
    targets: [
        // C edges: one thin modulemap per Debian library, nothing else.
        .systemLibrary(name: "CSSL", pkgConfig: "openssl", providers: [.apt(["libssl-dev"])]),
        .systemLibrary(name: "CWebsockets", pkgConfig: "libwebsockets", providers: [.apt(["libwebsockets-dev"])]),
        .systemLibrary(name: "CSQLite", pkgConfig: "sqlite3", providers: [.apt(["libsqlite3-dev"])]),

        .target(name: "GatewayProtocol", dependencies: ["CSSL"]),
        .target(name: "WebSocketTransport", dependencies: ["CWebsockets", "CSSL"]),
        .target(name: "Store", dependencies: ["CSQLite", "GatewayProtocol"]),
        .target(name: "GatewayClient", dependencies: ["GatewayProtocol", "WebSocketTransport", "Store"]),
        .target(name: "LoopbackGateway", dependencies: ["GatewayProtocol", "WebSocketTransport"]),
        .target(name: "NodeRuntime", dependencies: ["GatewayProtocol", "GatewayClient", "Store", "LoopbackGateway"]),
        .executableTarget(name: "clawvoice", dependencies: ["NodeRuntime"]),

        .testTarget(name: "GatewayProtocolTests", dependencies: ["GatewayProtocol"]),
        .testTarget(name: "WebSocketTransportTests", dependencies: ["WebSocketTransport"]),
        .testTarget(name: "StoreTests", dependencies: ["Store", "GatewayProtocol"]),
        .testTarget(name: "GatewayClientTests", dependencies: ["GatewayClient", "LoopbackGateway", "GatewayProtocol", "Store"]),
        .testTarget(name: "NodeRuntimeTests", dependencies: ["NodeRuntime", "LoopbackGateway", "GatewayProtocol"]),
    ]
)
