// WakeEnrollmentStore: where enrollments live, <stateDir>/wake-enroll/<stem>/ (enrollment.json
// and the takes as take-N.wav, 16 kHz mono 16-bit), and reading, writing and removing them.
// The directory holds the household's voices: created 0700, files 0600.

import Audio
import ClawvoiceCore
public import Foundation

public struct WakeEnrollmentStore: Sendable {
    public let directory: String

    /// `stateDir`: the node's state directory (RuntimePaths.stateDir).
    public init(stateDir: String) { directory = stateDir + "/wake-enroll" }

    public func triggerDirectory(_ phrase: String) -> String { directory + "/" + WakeModelCatalog.fileStem(for: phrase) }
    public func enrollmentPath(_ phrase: String) -> String { triggerDirectory(phrase) + "/enrollment.json" }

    /// The enrollment for `phrase`, nil when there is none; throws a one-line reason when the file
    /// is there but unreadable.
    public func load(_ phrase: String) throws(WakeWordError) -> WakeEnrollment? {
        let path = enrollmentPath(phrase)
        guard FileManager.default.fileExists(atPath: path) else { return nil }
        do {
            return try JSONDecoder().decode(WakeEnrollment.self, from: Data(contentsOf: URL(fileURLWithPath: path)))
        } catch {
            throw .corrupt(path: path, reason: "the enrollment does not read (\(error)); `clawvoice wake enroll \(phrase) --reset` removes it")
        }
    }

    /// Each model's usable enrollment, in `models` order (nil: none, or one that does not fit,
    /// whose line is in `problems`).
    public func enrollments(for models: [WakeModel]) -> (enrollments: [WakeEnrollment?], problems: [String]) {
        var out: [WakeEnrollment?] = [], problems: [String] = []
        for m in models {
            do {
                guard let e = try load(m.phrase) else { out.append(nil); continue }
                if let why = e.mismatch(with: m) {
                    problems.append("the enrollment of \"\(m.phrase)\" is not used: \(why); enroll again (clawvoice wake enroll \(m.phrase))")
                    out.append(nil)
                } else {
                    out.append(e)
                }
            } catch {
                problems.append(error.description)
                out.append(nil)
            }
        }
        return (out, problems)
    }

    /// Writes the takes and the enrollment (replacing an earlier one of the same trigger).
    public func save(_ enrollment: WakeEnrollment, takes: [[Int16]]) throws {
        let dir = triggerDirectory(enrollment.phrase)
        try? FileManager.default.removeItem(atPath: dir)
        try FileManager.default.createDirectory(atPath: dir, withIntermediateDirectories: true, attributes: [.posixPermissions: 0o700])
        try? FileManager.default.setAttributes([.posixPermissions: 0o700], ofItemAtPath: directory)
        for (i, take) in takes.enumerated() where i < enrollment.takes.count {
            try write(Self.wav(take), to: dir + "/" + enrollment.takes[i])
        }
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys]
        try write(encoder.encode(enrollment), to: enrollmentPath(enrollment.phrase))
    }

    /// Removes the trigger's enrollment and takes; false when there was none.
    @discardableResult
    public func reset(_ phrase: String) throws -> Bool {
        let dir = triggerDirectory(phrase)
        guard FileManager.default.fileExists(atPath: dir) else { return false }
        try FileManager.default.removeItem(atPath: dir)
        return true
    }

    /// Triggers (as enrolled) that have an enrollment file.
    public func enrolledPhrases() -> [String] {
        let stems = (try? FileManager.default.contentsOfDirectory(atPath: directory)) ?? []
        return stems.sorted().compactMap { stem in
            let path = directory + "/" + stem + "/enrollment.json"
            guard let data = FileManager.default.contents(atPath: path),
                  let e = try? JSONDecoder().decode(WakeEnrollment.self, from: data) else { return nil }
            return e.phrase
        }
    }

    private func write(_ data: Data, to path: String) throws {
        guard FileManager.default.createFile(atPath: path, contents: data, attributes: [.posixPermissions: 0o600]) else {
            throw CocoaError(.fileWriteUnknown, userInfo: [NSFilePathErrorKey: path])
        }
    }

    /// A 16 kHz mono 16-bit WAV file of `samples`.
    public static func wav(_ samples: [Int16]) -> Data { Data(WAVFile.encode(PCMBuffer(format: .voice, samples: samples))) }
}
