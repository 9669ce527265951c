// swift-tools-version:6.0
// clawvoice: a Linux voice node for OpenClaw gateways. See README.md and the design notes.
import Foundation
import PackageDescription

let package = Package(
    name: "clawvoice",
    products: [
        .executable(name: "clawvoice", targets: ["clawvoice"]),
        .executable(name: "clawvoice-bench", targets: ["clawvoice-bench"]),
    ],
    targets: [
        // C edges: one thin modulemap per Debian library, nothing else.
        .systemLibrary(name: "CSSL", pkgConfig: "openssl", providers: [.apt(["libssl-dev"])]),
        .systemLibrary(name: "CWebsockets", pkgConfig: "libwebsockets", providers: [.apt(["libwebsockets-dev"])]),
        .systemLibrary(name: "CSQLite", pkgConfig: "sqlite3", providers: [.apt(["libsqlite3-dev"])]),
        .systemLibrary(name: "CPulse", pkgConfig: "libpulse", providers: [.apt(["libpulse-dev"])]),
        .systemLibrary(name: "COpus", pkgConfig: "opus", providers: [.apt(["libopus-dev"])]),
        .systemLibrary(name: "COpusEnc", pkgConfig: "libopusenc", providers: [.apt(["libopusenc-dev"])]),
        .systemLibrary(name: "COpusFile", pkgConfig: "opusfile", providers: [.apt(["libopusfile-dev"])]),
        .systemLibrary(name: "COgg", pkgConfig: "ogg", providers: [.apt(["libogg-dev"])]),
        .systemLibrary(name: "CSndFile", pkgConfig: "sndfile", providers: [.apt(["libsndfile1-dev"])]),
        .systemLibrary(name: "CMpg123", pkgConfig: "libmpg123", providers: [.apt(["libmpg123-dev"])]),
        .systemLibrary(name: "CEspeak", pkgConfig: "espeak-ng", providers: [.apt(["libespeak-ng-dev"])]),
        .systemLibrary(name: "CSpeexDSP", pkgConfig: "speexdsp", providers: [.apt(["libspeexdsp-dev"])]),
        .systemLibrary(name: "CEvdev", pkgConfig: "libevdev", providers: [.apt(["libevdev-dev"])]),
        .systemLibrary(name: "CSystemd", pkgConfig: "libsystemd", providers: [.apt(["libsystemd-dev"])]),
        .systemLibrary(name: "CAvahi", pkgConfig: "avahi-client", providers: [.apt(["libavahi-client-dev"])]),
        .systemLibrary(name: "CGStreamer", pkgConfig: "gstreamer-webrtc-1.0",
                       providers: [.apt(["libgstreamer-plugins-bad1.0-dev", "gstreamer1.0-plugins-bad", "gstreamer1.0-nice"])]),
        .systemLibrary(name: "COpenBLAS", pkgConfig: "openblas", providers: [.apt(["libopenblas-dev"])]),

        // The one C++ edge: a C face over Debian's libwebrtc-audio-processing (echo cancellation).
        .target(name: "CWebRTCAudio",
                cxxSettings: [.unsafeFlags(["-I/usr/include/webrtc_audio_processing", "-DWEBRTC_POSIX",
                                            "-DWEBRTC_AUDIO_PROCESSING_ONLY_BUILD", "-std=c++11", "-w"])],
                linkerSettings: [.linkedLibrary("webrtc_audio_processing")]),

        // WebRTC media (issue 23): a C shim over GStreamer's webrtcbin, for the GObject signal plumbing.
        .target(name: "CWebRTCPeer", dependencies: ["CGStreamer"],
                linkerSettings: ["gstwebrtc-1.0", "gstsdp-1.0", "gstreamer-1.0", "gobject-2.0", "glib-2.0"].map { .linkedLibrary($0) }),

        // The pure core: machines and value types, no C library even indirectly (tests/core-without-c.sh proves it).
        .target(name: "GatewayProtocol"),
        .target(name: "ClawvoiceCore", dependencies: ["GatewayProtocol"]),
        .target(name: "GatewayCrypto", dependencies: ["CSSL", "GatewayProtocol"]),
        .target(name: "WebSocketTransport", dependencies: ["CWebsockets", "CSSL"]),
        .target(name: "Store", dependencies: ["CSQLite", "ClawvoiceCore", "GatewayProtocol", "GatewayCrypto"]),
        .target(name: "GatewayClient", dependencies: ["ClawvoiceCore", "GatewayProtocol", "GatewayCrypto", "WebSocketTransport", "Store"]),
        .target(name: "Audio", dependencies: ["ClawvoiceCore", "CPulse", "COgg", "CSndFile", "COpus", "COpusEnc", "COpusFile", "CMpg123", "CEspeak", "CSpeexDSP"]),
        .target(name: "AudioFrontEnd", dependencies: ["ClawvoiceCore", "Audio", "CWebRTCAudio", "CSpeexDSP"]),
        .target(name: "Buttons", dependencies: ["ClawvoiceCore", "CEvdev", "GatewayProtocol"]),
        .target(name: "WakeWord", dependencies: ["ClawvoiceCore", "Audio", "COpenBLAS"]),
        .target(name: "Talk", dependencies: ["ClawvoiceCore", "Audio", "AudioFrontEnd", "GatewayProtocol", "GatewayClient", "Store", "WakeWord", "WebSocketTransport"]),
        .target(name: "Realtime", dependencies: ["ClawvoiceCore", "CWebRTCPeer", "GatewayProtocol", "GatewayClient", "WebSocketTransport"]),
        .target(name: "Discovery", dependencies: ["ClawvoiceCore", "CAvahi", "GatewayProtocol"]),
        .target(name: "LoopbackGateway", dependencies: ["ClawvoiceCore", "GatewayProtocol", "GatewayCrypto", "WebSocketTransport", "Audio"]),
        // What the daemon and the CLI share: config, paths, the control protocol and client, events' names.
        .target(name: "NodeRuntime", dependencies: ["ClawvoiceCore", "GatewayCrypto", "GatewayProtocol", "GatewayClient", "WebSocketTransport", "Store", "LoopbackGateway", "Audio", "Talk"]),
        // `clawvoice run`: the services of one ServiceGroup.
        .target(name: "Daemon", dependencies: ["NodeRuntime", "ClawvoiceCore", "GatewayCrypto", "CSystemd", "GatewayProtocol", "GatewayClient", "WebSocketTransport", "Store", "Audio", "Buttons", "Talk", "WakeWord", "Realtime"]),
        // The command line: one type per subcommand, CLI.swift the dispatcher.
        .target(name: "CLI", dependencies: ["NodeRuntime", "Daemon", "ClawvoiceCore", "GatewayCrypto", "GatewayProtocol", "GatewayClient", "WebSocketTransport", "Store", "LoopbackGateway", "Audio", "Talk", "WakeWord", "Discovery", "Realtime"]),
        .executableTarget(name: "clawvoice", dependencies: ["CLI", "WakeWord"]),
        
        // Rigs and wait helpers for the tests and clawvoice-bench; never linked into clawvoice.
        .target(name: "ClawvoiceTesting", dependencies: ["ClawvoiceCore", "Audio", "AudioFrontEnd", "WakeWord", "Talk", "GatewayClient",
                                                          "GatewayProtocol", "LoopbackGateway", "NodeRuntime", "Daemon", "Realtime", "Store"]),
        .executableTarget(name: "clawvoice-bench", dependencies: ["ClawvoiceCore", "ClawvoiceTesting", "Audio", "AudioFrontEnd", "Talk", "NodeRuntime", "LoopbackGateway", "COpus", "WakeWord", "Realtime", "Store", "GatewayClient", "GatewayProtocol"]),

        .testTarget(name: "ClawvoiceCoreTests", dependencies: ["ClawvoiceCore", "GatewayProtocol"]),
        .testTarget(name: "GatewayProtocolTests", dependencies: ["GatewayProtocol", "GatewayCrypto"]),
        .testTarget(name: "WebSocketTransportTests", dependencies: ["WebSocketTransport"]),
        .testTarget(name: "StoreTests", dependencies: ["ClawvoiceCore", "GatewayCrypto", "Store", "GatewayProtocol"]),
        .testTarget(name: "GatewayClientTests", dependencies: ["ClawvoiceCore", "GatewayCrypto", "GatewayClient", "LoopbackGateway", "GatewayProtocol", "Store"]),
        .testTarget(name: "NodeRuntimeTests", dependencies: ["ClawvoiceCore", "ClawvoiceTesting", "NodeRuntime", "Daemon", "CLI", "LoopbackGateway", "GatewayProtocol", "Audio", "WakeWord", "WebSocketTransport", "Buttons", "Talk", "GatewayClient", "Realtime"]),
        .testTarget(name: "AudioTests", dependencies: ["ClawvoiceCore", "ClawvoiceTesting", "Audio", "AudioFrontEnd"]),
        .testTarget(name: "ButtonsTests", dependencies: ["ClawvoiceCore", "Buttons"], exclude: ["Fixtures"]),
        .testTarget(name: "WakeWordTests", dependencies: ["ClawvoiceCore", "ClawvoiceTesting", "WakeWord", "Audio"], exclude: ["Fixtures"]),
        .testTarget(name: "RealtimeTests", dependencies: ["ClawvoiceCore", "ClawvoiceTesting", "Realtime", "GatewayProtocol", "GatewayClient", "LoopbackGateway", "Store", "WebSocketTransport"]),
        .testTarget(name: "DiscoveryTests", dependencies: ["ClawvoiceCore", "Discovery"]),
        .testTarget(name: "TalkTests", dependencies: ["ClawvoiceCore", "ClawvoiceTesting", "Talk", "Audio", "LoopbackGateway", "GatewayClient", "GatewayProtocol", "Store"]),
    ]
)

// The Swift settings every Swift target is built with. ExistentialAny: an existential says `any`.
// MemberImportVisibility: a file uses only the members of modules it imports itself.
// InternalImportsByDefault: a plain `import` is internal; `public import X` only where the
// module's public API shows X's types (docs/ARCHITECTURE.md, "Imports").
let swiftSettings: [SwiftSetting] = [
    .enableUpcomingFeature("ExistentialAny"),
    .enableUpcomingFeature("MemberImportVisibility"),
    .enableUpcomingFeature("InternalImportsByDefault"),
]
// The signal paths (the core's endpointer and machines, the audio edge, the echo front end, the
// wake detector) are optimized in debug builds too: the tests push minutes of audio through them
// (EchoRoomTests and WakeWordTests: 74 s of CPU at -Onone, 13.5 s optimized). To step through
// them line by line, build with CLAWVOICE_ONONE=1 in the environment.
let optimizedInDebug: Set<String> = ["ClawvoiceCore", "Audio", "AudioFrontEnd", "WakeWord"]
let optimizeInDebug = ProcessInfo.processInfo.environment["CLAWVOICE_ONONE"] == nil
for target in package.targets where optimizeInDebug && optimizedInDebug.contains(target.name) {
    target.swiftSettings = (target.swiftSettings ?? []) + [.unsafeFlags(["-O"], .when(configuration: .debug))]
}

for target in package.targets where target.type != .system && target.name != "CWebRTCAudio" {
    target.swiftSettings = (target.swiftSettings ?? []) + swiftSettings
}
