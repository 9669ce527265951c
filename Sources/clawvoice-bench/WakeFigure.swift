// The wake figure of clawvoice-bench: CPU of the three default triggers together (one shared
// embedding front end, three heads) beside pyopen-wakeword on the same audio, in this run.

import ClawvoiceTesting
import Foundation
import WakeWord

func wakeFigures() -> [Figure] {
    var out: [Figure] = []
    let modelsDir = WakeModelCatalog.defaultDirectory()
    let available = WakeModelCatalog.defaultPhrases.filter { (try? WakeModelCatalog(directory: modelsDir).load([$0]).models.isEmpty) == false }
    let wakeSeconds = 300.0
    if !available.isEmpty, let (seconds, cpu) = try? WakeBench.measure(modelsDirectory: modelsDir, phrases: available, secondsOfAudio: wakeSeconds) {
        let ours = 100 * cpu / seconds / Double(available.count) * 3
        // The baseline needs the training venv (models/training/train.sh makes it).
        let repo = (modelsDir as NSString).deletingLastPathComponent
        let python = repo + "/models/training/.venv/bin/python", script = repo + "/models/training/bench_oww.py"
        var baseline: Double?
        var baselineNote = "pyopen-wakeword baseline skipped: no \(python) (run models/training/train.sh once)"
        if FileManager.default.isExecutableFile(atPath: python) {
            let wav = NSTemporaryDirectory() + "clawvoice-wake-bench-\(ProcessInfo.processInfo.processIdentifier).wav"
            defer { try? FileManager.default.removeItem(atPath: wav) }
            do {
                try WakeBench.writeBenchAudio(to: wav, secondsOfAudio: wakeSeconds)
                let p = Process()
                p.executableURL = URL(fileURLWithPath: python)
                p.arguments = [script, wav]
                let pipe = Pipe()
                p.standardOutput = pipe
                try p.run()
                let data = pipe.fileHandleForReading.readDataToEndOfFile()
                p.waitUntilExit()
                if let o = try? JSONSerialization.jsonObject(with: data) as? [String: Any], let c = o["cpuSeconds"] as? Double,
                   let s = o["secondsOfAudio"] as? Double, s > 0 {
                    baseline = 100 * c / s
                    baselineNote = "pyopen-wakeword 1.1.0 (TFLite; hey_jarvis, alexa, hey_mycroft) on the same audio: \(String(format: "%.2f", 100 * c / s)) % of a core"
                } else {
                    baselineNote = "pyopen-wakeword baseline failed (exit \(p.terminationStatus))"
                }
            } catch {
                baselineNote = "pyopen-wakeword baseline failed: \(error)"
            }
        }
        out.append(Figure(name: "wake_cpu_three_triggers", value: ours, unit: "% of a core", baseline: baseline,
                              ratio: baseline.map { ours / max($0, 1e-9) },
                              detail: "\(Int(seconds)) s of audio through the embedding front end + \(available.joined(separator: ", ")) (\(available.count) head\(available.count == 1 ? "" : "s") measured, scaled to three; goal < 1 % of a core); ratio = ours / baseline; \(baselineNote)"))
    } else {
        FileHandle.standardError.write(Data("wake bench skipped: models missing under \(modelsDir)\n".utf8))
    }

    return out
}
