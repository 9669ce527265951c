// OutboxFailure.classify: GatewayClient's request errors sorted by what the outbox should do
// (moved from OutboxMachineTests when the machine went to ClawvoiceCore; the edge stays in Talk).

import ClawvoiceCore
import GatewayClient
import GatewayProtocol
import Talk
import Testing

@Suite struct `Outbox machine: failures from the gateway` {
    @Test func `errors are sorted by what the outbox should do`() {
        #expect(OutboxFailure.classify(GatewayRequestError.notConnected("x")).kind == .offline)
        #expect(OutboxFailure.classify(GatewayRequestError.disconnected).kind == .offline)
        #expect(OutboxFailure.classify(GatewayRequestError.timedOut(method: "chat.send", ms: 30_000)).kind == .refused)
        #expect(OutboxFailure.classify(GatewayRequestError.tooLarge(bytes: 10, limit: 5)).kind == .permanent)
        #expect(OutboxFailure.classify(GatewayRequestError.failed(ErrorShape(code: "INVALID_REQUEST", message: "bad"))).kind == .permanent)
        #expect(OutboxFailure.classify(GatewayRequestError.failed(ErrorShape(code: "FORBIDDEN", message: "missing scope"))).kind == .permanent)
        let busy = OutboxFailure.classify(GatewayRequestError.failed(ErrorShape(code: "UNAVAILABLE", message: "busy", retryAfterMs: 900)))
        #expect(busy.kind == .refused && busy.retryAfterMs == 900)
        struct Odd: Error {}
        #expect(OutboxFailure.classify(Odd()).kind == .refused)
    }
}
