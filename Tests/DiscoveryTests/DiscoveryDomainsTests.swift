// The wide-area domains GatewayDiscovery browses (moved from DiscoveryMachineTests when the
// machine went to ClawvoiceCore; GatewayDiscovery is the executor).

import ClawvoiceCore
import Discovery
import Testing

@Suite struct DiscoveryDomainsTests {
    @Test func `domains: local is the default, others get their trailing dot`() {
        #expect(DiscoveryNames.normalizeDomain("local") == nil)
        #expect(DiscoveryNames.normalizeDomain("Local.") == nil)
        #expect(DiscoveryNames.normalizeDomain(" ") == nil)
        #expect(DiscoveryNames.normalizeDomain("openclaw.internal") == "openclaw.internal.")
        #expect(DiscoveryNames.normalizeDomain("openclaw.internal.") == "openclaw.internal.")
        #expect(GatewayDiscovery.domains(wideArea: [nil, "openclaw.internal", "openclaw.internal."]) == ["local.", "openclaw.internal."])
    }
}
