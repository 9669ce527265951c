// libFuzzer target for control-socket lines (Sources/NodeRuntime/ControlProtocol.swift), built
// with GatewayProtocol's sources by fuzz/run.sh. The input is split at newlines as the socket
// would split it. Properties checked on every line:
//   * ControlLine.parseRequest never crashes; what it accepts is an object with a non-empty
//     string "cmd"; what it refuses gets a refusal line that is one line of JSON.
//   * The daemon's answer lines (accepted, response, refusal) parse back on the client side as
//     what they are, and parseReply never crashes on the raw line either.
//   * ControlAdmission stays within its cap under the connect/read/close pattern the bytes spell.

import Foundation

private let admissionLock = NSLock()
nonisolated(unsafe) private var admission: ControlAdmission = {
    var l = ControlAdmission.Limits()
    l.maxConnections = 4
    return ControlAdmission(limits: l)
}()

@_cdecl("LLVMFuzzerTestOneInput")
public func fuzz(_ data: UnsafePointer<UInt8>, _ size: Int) -> CInt {
    let bytes = Array(UnsafeBufferPointer(start: data, count: size))
    // The first eight lines: each costs a JSON decode, and many tiny lines only slow the search.
    for line in bytes.split(separator: UInt8(ascii: "\n"), maxSplits: 8, omittingEmptySubsequences: false).prefix(8) {
        _ = ControlLine.parseReply(line)
        switch ControlLine.parseRequest(line) {
        case .success(let request):
            guard let cmd = request["cmd"]?.stringValue, !cmd.isEmpty else { fatalError("accepted a request without cmd") }
            let response: JSONValue = ["ok": true, "echo": request]
            let encoded = ControlLine.responseLine(response)
            if encoded.contains("\n") { fatalError("response line holds a newline") }
            if ControlLine.parseReply(Array(encoded.utf8)) != .response(response) { fatalError("response does not round-trip: \(encoded)") }
        case .failure(let refusal):
            let line = ControlLine.refusalLine(refusal.description)
            if line.contains("\n") { fatalError("refusal holds a newline") }
            guard case .response(let v) = ControlLine.parseReply(Array(line.utf8)), v["ok"] == .bool(false) else {
                fatalError("refusal line does not parse as a refusal: \(line)")
            }
        }
    }
    // Admission: each byte is one event on a small set of connection ids.
    admissionLock.lock()
    defer { admissionLock.unlock() }
    var now: Int64 = 0
    for b in bytes.prefix(256) {
        let id = Int(b & 7)
        now += Int64(b >> 3)
        switch b % 4 {
        case 0: _ = admission.accepted(id, nowMs: now)
        case 1: admission.requestRead(id)
        case 2: admission.closed(id)
        default: _ = admission.acceptFailed(errno: Int32(b) % 40)
        }
        if admission.count > admission.limits.maxConnections { fatalError("admission over its cap: \(admission.count)") }
    }
    return 0
}
