// libFuzzer target for everything clawvoice decodes from a gateway socket or a pasted setup code.
// Build and run it with fuzz/run.sh. GatewayProtocol's sources are compiled into this module,
// so the target sees the same code the app runs, with no change to the library's public API.
//
// Properties checked on every input:
//   * GatewayFrame.decode never crashes; it returns a frame or a DecodingFailure.
//   * A frame that decodes re-encodes, and the re-encoded bytes decode to the same frame.
//   * The typed payload decoders (challenge, hello-ok, invoke request/cancel, chat, shutdown)
//     never crash on whatever payload the frame carries.
//   * SetupCode.parse never crashes on the input taken as text.

import Foundation

@_cdecl("LLVMFuzzerTestOneInput")
public func fuzz(_ data: UnsafePointer<UInt8>, _ size: Int) -> CInt {
    let bytes = UnsafeBufferPointer(start: data, count: size)

    _ = try? SetupCode.parse(String(decoding: bytes, as: UTF8.self), nowMs: 1_767_225_600_000)

    guard let frame = try? GatewayFrame.decode(bytes) else { return 0 }

    let encoded: Data
    do { encoded = try frame.encoded() } catch { fatalError("decoded frame does not re-encode: \(error)") }
    let again: GatewayFrame
    do { again = try GatewayFrame.decode(encoded) } catch {
        fatalError("re-encoded frame does not decode: \(error) (\(String(decoding: encoded, as: UTF8.self)))")
    }
    if again != frame {
        fatalError("round trip changed the frame: \(frame) -> \(again)")
    }

    var payloads: [JSONValue?] = []
    switch frame {
    case .event(let e): payloads = [e.payload]
    case .response(let r): payloads = [r.payload, r.error?.details]
    case .request(let r): payloads = [r.params]
    case .cancel: break
    }
    for payload in payloads {
        _ = NodeInvokeRequest(payload: payload)?.payload
        _ = try? NodeInvokeRequest(payload: payload)?.params()
        _ = NodeInvokeCancel(payload: payload)
        _ = HelloOk(payload: payload)
        _ = ChatEvent(payload: payload)?.payload
        _ = ConnectChallenge(payload: payload)
        _ = ShutdownEvent(payload: payload)
        _ = VoiceWakeTriggers(payload: payload)
    }
    return 0
}
