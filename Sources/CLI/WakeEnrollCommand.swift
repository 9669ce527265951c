// `clawvoice wake enroll TRIGGER` (takes from the microphone, checked one by one, kept with the
// enrollment under the state directory), `wake enroll TRIGGER --reset`, and `wake status`. The
// decisions are WakeWord's pure values (EnrollmentTakeListener, EnrollmentTakeCheck,
// WakeEnrollment); this file is the microphone, the prompts and the files.

import Audio
import ClawvoiceCore
import Foundation
import NodeRuntime
import WakeWord

public enum WakeEnrollCommand {
    static func run(_ action: String, _ p: CLI.Parsed, config: ClawConfig, paths: RuntimePaths) async throws -> Int32 {
        let models = p.flags["--models"] ?? config.wake.modelsDirectory ?? WakeModelCatalog.defaultDirectory()
        if action == "status" {
            let phrases = p.flags["--phrases"].map { $0.split(separator: ",").map { String($0).trimmingCharacters(in: .whitespaces) } }
            for line in status(phrases: phrases, modelsDirectory: models, stateDir: paths.stateDir) { CLI.say(line) }
            return 0
        }
        guard p.positionals.count == 2 else {
            throw CLI.UsageError(description: "wake enroll needs the trigger: clawvoice wake enroll openclaw")
        }
        let trigger = p.positionals[1]
        if p.flags["--reset"] != nil {
            CLI.say(try reset(trigger: trigger, stateDir: paths.stateDir))
            return 0
        }
        var takes = 5
        if let s = p.flags["--takes"] {
            guard let v = Int(s), (3...20).contains(v) else { throw CLI.UsageError(description: "wake enroll: --takes needs a whole number from 3 to 20, got \(s)") }
            takes = v
        }
        var wait = 8.0
        if let s = p.flags["--wait"] {
            guard let v = Double(s), v >= 1 else { throw CLI.UsageError(description: "wake enroll: --wait needs a number of seconds (1 or more), got \(s)") }
            wait = v
        }
        return try await enroll(trigger: trigger, takes: takes, waitSeconds: wait, modelsDirectory: models, stateDir: paths.stateDir,
                                source: p.flags["--source"] ?? config.audio.source, terminal: isatty(STDOUT_FILENO) == 1, say: { CLI.say($0) })
    }

    /// Removes the trigger's enrollment; the line that says what happened.
    public static func reset(trigger: String, stateDir: String) throws -> String {
        let store = WakeEnrollmentStore(stateDir: stateDir)
        guard try store.reset(trigger) else { return "\"\(trigger)\" is not enrolled: nothing to remove" }
        return "removed the enrollment of \"\(trigger)\" and its takes (\(store.triggerDirectory(trigger))): the model alone decides again (the daemon from its next start)"
    }

    /// One line per trigger: its model, and whether it is enrolled.
    public static func status(phrases: [String]?, modelsDirectory: String, stateDir: String) -> [String] {
        let store = WakeEnrollmentStore(stateDir: stateDir)
        let catalog = WakeModelCatalog(directory: modelsDirectory)
        var list = phrases ?? WakeModelCatalog.defaultPhrases
        if phrases == nil { list += store.enrolledPhrases().filter { !list.contains($0) } }
        let width = list.map(\.count).max() ?? 0
        return list.map { phrase in
            let name = phrase.padding(toLength: width, withPad: " ", startingAt: 0)
            let (found, missing) = catalog.resolve([phrase])
            let model = found.first.map { "model \($0.path)" } ?? "no model → \(missing.first?.command ?? WakeModelCatalog.trainingCommand(for: phrase))"
            let enrolled: String
            do {
                if let e = try store.load(phrase) {
                    enrolled = "enrolled: \(e.templates.count) takes in \(store.triggerDirectory(phrase)) (undo: clawvoice wake enroll \(phrase) --reset)"
                } else {
                    enrolled = "not enrolled (clawvoice wake enroll \(phrase) tunes it to your voices)"
                }
            } catch {
                enrolled = "enrollment unreadable: \(error)"
            }
            return "\(name)  \(model); \(enrolled)"
        }
    }

    /// Asks for `takes` good takes of `trigger` from the microphone, then keeps them and the
    /// enrollment. Lines go through `say`; on a terminal the meter is a bar redrawn in place.
    public static func enroll(trigger: String, takes: Int, waitSeconds: Double, modelsDirectory: String, stateDir: String,
                              source: String?, server: String? = nil, terminal: Bool = false,
                              say: @escaping @Sendable (String) -> Void) async throws -> Int32 {
        let (models, missing) = try WakeModelCatalog(directory: modelsDirectory).load([trigger])
        guard let model = models.first else { throw WakeWordError.noModels(missing) }
        let connection = PulseConnection(server: server, clientName: "clawvoice-enroll")
        defer { connection.close() }
        do { try await connection.waitUntilReady() } catch {
            throw WakeCommand.InputError(description: "no sound server: \(error) (is PulseAudio or pipewire-pulse running?)")
        }
        let capture = PulseCapture(connection: connection, source: source)
        do { try await capture.start() } catch {
            throw WakeCommand.InputError(description: "cannot capture from \(source ?? "the default source"): \(error) (`clawvoice audio devices` lists sources)")
        }
        defer { capture.stop() }
        let emit: (String) -> Void = { text in
            if terminal { FileHandle.standardOutput.write(Data(text.utf8)) } else { say(text) }
        }
        func line(_ text: String) { emit(terminal ? "\r\u{1B}[K" + text + "\n" : text) }
        line("Enrolling \"\(trigger)\" from \(source ?? "the default source"): say it \(takes) times, one take at a time, as you would to wake the node (your usual distance and voice), and pause after each.")
        var listener = EnrollmentTakeListener()
        listener.waitMilliseconds = Int(waitSeconds * 1000)
        var kept: [[Int16]] = [], refused = 0
        let maxRefused = takes * 2 + 2
        var window: [Int16] = [], sinceMeter = 0
        line("Take 1 of \(takes): say \"\(trigger)\" now.")
        for await frame in capture.frames {
            let samples = frame.pcm.samples
            window += samples
            sinceMeter += samples.count
            if sinceMeter >= 4000 {             // a reading every 250 ms
                let level = WakeMeter.level(window[...])
                let db = level.peakDbfs.isFinite ? String(format: "%4.0f dBFS", level.peakDbfs) : "silent"
                emit(terminal ? "\r\u{1B}[K" + WakeMeter.bar(level.peakDbfs) + " " + db + (level.clipped ? " CLIP" : "")
                              : "level \(db)\(level.clipped ? " CLIP" : "")")
                window.removeAll(keepingCapacity: true)
                sinceMeter = 0
            }
            for event in listener.feed(samples) {
                var problem: String?
                switch event {
                case .heard: continue
                case .nothingHeard:
                    problem = "heard nothing for \(Int(waitSeconds)) s: is the microphone on and the right one (`clawvoice audio devices`; --source NAME)? Say it a little louder"
                case .tooLong:
                    problem = "that ran on for over 3 s: say only \"\(trigger)\", then pause"
                case .take(let take):
                    switch EnrollmentTakeCheck.check(take) {
                    case .refused(let why): problem = why
                    case .ok(let peak, let seconds):
                        kept.append(take)
                        line(String(format: "take %d: ok (peak %.0f dBFS, %.1f s)", kept.count, peak, seconds))
                    }
                }
                if let problem {
                    refused += 1
                    line("take \(kept.count + 1) refused: \(problem)")
                    if refused > maxRefused {
                        throw WakeCommand.InputError(description: "gave up after \(refused) refused takes; nothing was kept (the last: \(problem))")
                    }
                }
                if kept.count == takes { return try finish(trigger: trigger, model: model, takes: kept, stateDir: stateDir, line: line) }
                listener.restart()
                line("Take \(kept.count + 1) of \(takes)\(problem == nil ? "" : " again"): say \"\(trigger)\" now.")
            }
        }
        throw WakeCommand.InputError(description: "the microphone stopped (\(capture.status)); nothing was kept")
    }

    /// Builds and keeps the enrollment; the closing lines.
    static func finish(trigger: String, model: WakeModel, takes: [[Int16]], stateDir: String, line: (String) -> Void) throws -> Int32 {
        let names = takes.indices.map { "take-\($0 + 1).wav" }
        let (enrollment, best) = WakeEnrollment.from(takes: takes, model: model, takeNames: names)
        let store = WakeEnrollmentStore(stateDir: stateDir)
        do { try store.save(enrollment, takes: takes) } catch {
            throw WakeCommand.InputError(description: "cannot keep the takes in \(store.triggerDirectory(trigger)): \(error.localizedDescription)")
        }
        let heard = best.filter { Double($0) >= model.threshold }.count
        line("The model alone would have woken on \(heard) of your \(takes.count) takes (best scores \(best.map { String(format: "%.2f", $0) }.joined(separator: ", ")); it wakes at \(String(format: "%.2f", model.threshold))).")
        line("Enrolled \"\(trigger)\": \(takes.count) takes kept in \(store.triggerDirectory(trigger)). The daemon uses them from its next start (systemctl --user restart clawvoice); `clawvoice wake enroll \(trigger) --reset` undoes it.")
        return 0
    }
}
