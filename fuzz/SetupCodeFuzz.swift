// libFuzzer target for setup codes (Sources/GatewayProtocol/SetupCode.swift), built with
// GatewayProtocol's sources by fuzz/run.sh. Properties checked on every input:
//   * SetupCode.parse never crashes on the input as text, nor on it wrapped as a base64url code
//     (so the fuzzer reaches the JSON and field checks, not only the alphabet check).
//   * Every refusal is one line; every accepted code has a ws:// or wss:// URL.

import Foundation

private func check(_ text: String) {
    do {
        let code = try SetupCode.parse(text, nowMs: 1_767_225_600_000)
        if !(code.url.hasPrefix("ws://") || code.url.hasPrefix("wss://")) { fatalError("accepted a code whose url is \(code.url)") }
    } catch {
        if error.description.contains("\n") { fatalError("error is more than one line: \(error)") }
    }
}

@_cdecl("LLVMFuzzerTestOneInput")
public func fuzz(_ data: UnsafePointer<UInt8>, _ size: Int) -> CInt {
    let bytes = UnsafeBufferPointer(start: data, count: size)
    check(String(decoding: bytes, as: UTF8.self))
    check(Base64URL.encode(bytes))
    return 0
}
