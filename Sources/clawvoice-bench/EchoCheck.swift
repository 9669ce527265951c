// `clawvoice-bench --echo-check FILE…`: EchoRoomTests' figures on room recordings kept by
// `--echo-only --recording FILE`, one line per recording, so a canceller's change can be judged
// on many recordings (the test sees one new one per run) without recording them again: webrtc's
// and the linear canceller's ERLE, how often the reference moved, and "computer" heard
// over the assistant against the speaker silent, from 8 s on, as the test counts it.

import ClawvoiceTesting
import Foundation
import Talk
import WakeWord

func echoCheck(files: [String]) throws {
    let dir = WakeModelCatalog.defaultDirectory()
    guard let model = try WakeModelCatalog(directory: dir).load(["computer"]).models.first else {
        throw EchoCheckError(description: "no computer model in \(dir)")
    }
    let detector = WakeDetector(models: [model])
    var pass = 0
    for file in files {
        guard let data = FileManager.default.contents(atPath: file) else { throw EchoCheckError(description: "cannot read \(file)") }
        let rec = try JSONDecoder().decode(RoomRecording.self, from: data)
        let timed = try rec.cleaned(timed: true)
        let linear = rec.linearCleaned()
        let loud = try rec.wakeOverEcho(detector: detector, trigger: "computer", extraDb: 12, firstAt: 128_000)
        let level = try rec.wakeOverEcho(detector: detector, trigger: "computer", extraDb: 0, firstAt: 128_000)
        // EchoRoomTests' three expectations.
        let ok = 5 * loud.speaking >= 4 * loud.silent && 5 * level.speaking >= 4 * level.silent && level.speaking > level.webrtc
        if ok { pass += 1 }
        print(String(format: "%@: %.0f s, ERLE webrtc %.1f dB, linear %.1f dB, %d reference moves; +12 dB %d/%d (webrtc %d), 0 dB %d/%d (webrtc %d) of %d clips: %@",
                     (file as NSString).lastPathComponent, Double(rec.mic.count) / 16_000, rec.erle(cleaned: timed), rec.erle(cleaned: linear),
                     rec.referenceJumps(), loud.speaking, loud.silent, loud.webrtc, level.speaking, level.silent, level.webrtc, loud.clips, ok ? "pass" : "FAIL"))
    }
    print("echo check: \(pass) of \(files.count) recordings pass EchoRoomTests' wake-over-echo bars")
}

struct EchoCheckError: Error, CustomStringConvertible { var description: String }
