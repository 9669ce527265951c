// CallCommands (the D7 node commands) through the registry the gateway's invokes reach, on a real
// CallMachine (moved from CallMachineTests when the machine went to ClawvoiceCore).

import ClawvoiceCore
import GatewayClient
import GatewayProtocol
import Realtime
import Testing

/// The commands through the registry the gateway's invokes reach, on a real CallMachine.
@Suite struct CallCommandRegistryTests {
    actor Machine {
        var m = CallMachine()
        var token = 0
        func run(_ input: (Int) -> CallMachine.Input) -> CallMachine.Answer {
            token += 1
            for a in m.handle(input(token), nowMs: 0) { if case .answer(_, let answer) = a { return answer } }
            return .unavailable("no answer")
        }
        func online() { _ = m.handle(.operatorState(connected: true, incarnation: 1), nowMs: 0); _ = m.handle(.offer(CallOffer(webrtc: true, relay: false)), nowMs: 0) }
    }

    func invoke(_ r: NodeCommandRegistry, _ command: String, _ params: String?) async -> NodeInvokeResult {
        await r.handle(NodeInvokeRequest(id: "i1", nodeId: "n", command: command, paramsJSON: params), nodeId: "n")
    }

    @Test func theD7Contract() async {
        let machine = Machine()
        let r = NodeCommandRegistry()
        CallCommands.register(on: r, start: { await machine.run { .start(token: $0, origin: .invoke, callId: "c\($0)") } },
                              stop: { await machine.run { .stop(token: $0, cause: .talkStop) } })
        #expect(r.declaredCommands == ["talk.start", "talk.stop"])
        let offline = await invoke(r, "talk.start", "{}")
        #expect(offline.ok == false && offline.error?.code == "UNAVAILABLE")
        #expect(offline.error?.message.contains("the operator session is offline; the node reconnects automatically") == true)
        await machine.online()
        for bad in ["{\"x\":1}", "null", "[]"] {
            let res = await invoke(r, "talk.start", bad)
            #expect(res.error?.code == "INVALID_PARAMS")
            #expect(res.error?.message.hasSuffix("talk.start accepts only {}") == true)
            #expect(await invoke(r, "talk.stop", bad).error?.code == "INVALID_PARAMS")
        }
        #expect(await invoke(r, "talk.stop", "{}").payload == ["stopped": false])
        #expect(await invoke(r, "talk.start", "{}").payload == ["started": true])
        #expect(await invoke(r, "talk.start", nil).payload == ["started": false, "alreadyActive": true])
        #expect(await invoke(r, "talk.stop", "{}").payload == ["stopped": true])
    }
}
