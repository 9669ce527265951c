// The live line of `clawvoice wake listen`: the input level (a bar on a terminal, a number
// otherwise) beside each phrase's highest score since the last line. Pure formatting, so what a
// user sees is tested without a microphone; WakeCommand measures and writes.

import ClawvoiceCore
import Daemon
import Foundation
import GatewayCrypto
import NodeRuntime

public enum WakeMeter {
    /// The bar spans this range, one cell per 3 dB.
    public static let floorDbfs = -60.0
    public static let cells = 20

    /// Peak level of `samples` in dBFS (-infinity for digital silence) and whether any sample
    /// touched full scale (MicLevel's clipping rule).
    public static func level(_ samples: ArraySlice<Int16>) -> (peakDbfs: Double, clipped: Bool) {
        var peak = 0
        for s in samples { peak = max(peak, s == Int16.min ? 32768 : Int(abs(s))) }
        return (peak == 0 ? -.infinity : 20 * log10(Double(peak) / 32768), peak >= 32_700)
    }

    /// One reading. On a terminal it starts with a carriage return and clears the line, so each
    /// reading replaces the last (no newline); elsewhere it is a plain line for logs and pipes.
    /// `thresholds[i]` stars a score at or over it.
    public static func line(peakDbfs: Double, clipped: Bool, phrases: [String], scores: [Float], thresholds: [Float],
                            terminal: Bool) -> String {
        let db = peakDbfs.isFinite ? String(format: "%4.0f dBFS", peakDbfs) : "silent"
        let level = db + (clipped ? " CLIP" : "")
        let scoreText = phrases.indices.map { i in
            "\(phrases[i]) \(String(format: "%.2f", scores[i]))\(scores[i] >= thresholds[i] ? " *" : "")"
        }.joined(separator: "  ")
        guard terminal else { return "level \(level)  \(scoreText)" }
        return "\r\u{1B}[K" + bar(peakDbfs) + " " + level + "  " + scoreText
    }

    /// A detection's line: on a terminal it first clears the bar's line, and ends with a newline
    /// so the next reading draws below it.
    public static func detection(_ json: String, terminal: Bool) -> String {
        terminal ? "\r\u{1B}[K" + json + "\n" : json
    }

    /// `[██████··············]`: full cells for the level above the floor.
    public static func bar(_ peakDbfs: Double) -> String {
        let fraction = peakDbfs.isFinite ? min(max((peakDbfs - floorDbfs) / -floorDbfs, 0), 1) : 0
        let full = Int((fraction * Double(cells)).rounded())
        return "[" + String(repeating: "█", count: full) + String(repeating: "·", count: cells - full) + "]"
    }
}
