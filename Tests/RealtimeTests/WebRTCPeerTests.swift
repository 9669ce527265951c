// The WebRTC edge against itself over loopback: two webrtcbin peers, offer/answer in memory.
import Foundation
import Testing
@testable import Realtime

@Suite struct WebRTCPeerTests {
    @Test func offerIsAudioOnlyOpusWithCandidates() async throws {
        let peer = try WebRTCPeer(sampleRate: 16000, localAddress: "127.0.0.1")
        defer { peer.close() }
        let sdp = try await peer.createOffer()
        print(sdp)
        #expect(sdp.hasPrefix("v=0"))
        #expect(sdp.contains("m=audio"))
        #expect(!sdp.contains("m=application"))
        #expect(!sdp.contains("m=video"))
        #expect(sdp.lowercased().contains("opus/48000/2"))
        #expect(sdp.contains("a=candidate:"))
        #expect(sdp.contains("a=sendrecv"))
    }
}
