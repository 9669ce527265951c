// WakeModelCatalog: which trigger phrases have a trained model in a models directory, which
// do not, and the exact command that trains a missing one. Also where that directory is.

public import Foundation

/// A trigger with no model: where it was looked for and how to make it.
public struct MissingWakeModel: Sendable, Equatable, CustomStringConvertible {
    public var phrase: String
    /// The manifest path that does not exist.
    public var expectedPath: String
    /// `make wake-model TRIGGER="…"`, run from the repository.
    public var command: String

    public var description: String {
        "no wake model for \"\(phrase)\" (looked for \(expectedPath)); train one with: \(command)"
    }
}

/// The models under one directory: `<directory>/<stem>.json` + `<stem>.bin` per phrase.
public struct WakeModelCatalog: Sendable {
    /// The gateway's default triggers (talk-and-voice §4.1).
    public static let defaultPhrases = ["openclaw", "claude", "computer"]

    public let directory: String

    public init(directory: String) { self.directory = directory }

    /// File name stem of a phrase: lowercased, every run of characters other than ASCII
    /// letters and digits replaced by one "-", no "-" at either end ("Hey, Claw!" → "hey-claw").
    /// A phrase with no ASCII letters or digits becomes "x" and the hex of its UTF-8 bytes.
    /// models/training/train.py applies the same rule.
    public static func fileStem(for phrase: String) -> String {
        var out = ""
        var pendingDash = false
        for u in phrase.lowercased().unicodeScalars {
            if (u >= "a" && u <= "z") || (u >= "0" && u <= "9") {
                if pendingDash && !out.isEmpty { out.append("-") }
                pendingDash = false
                out.unicodeScalars.append(u)
            } else {
                pendingDash = true
            }
        }
        if out.isEmpty {
            let trimmed = phrase.trimmingCharacters(in: .whitespacesAndNewlines)
            out = "x" + trimmed.utf8.map { String($0, radix: 16).leftPadded(to: 2) }.joined()
        }
        return out
    }

    /// The command that trains `phrase`, quoted for a POSIX shell.
    public static func trainingCommand(for phrase: String) -> String {
        var escaped = ""
        for ch in phrase.trimmingCharacters(in: .whitespacesAndNewlines) {
            if ch == "\"" || ch == "\\" || ch == "$" || ch == "`" { escaped.append("\\") }
            escaped.append(ch)
        }
        return "make wake-model TRIGGER=\"\(escaped)\""
    }

    /// `<directory>/<stem>.json`.
    public func manifestPath(for phrase: String) -> String {
        (directory as NSString).appendingPathComponent(Self.fileStem(for: phrase) + ".json")
    }

    /// Splits `phrases` into those with a manifest on disk and those without. Blank phrases are
    /// dropped, duplicates (same stem) kept once, order preserved.
    public func resolve(_ phrases: [String]) -> (found: [(phrase: String, path: String)], missing: [MissingWakeModel]) {
        var found: [(String, String)] = [], missing: [MissingWakeModel] = [], seen = Set<String>()
        for raw in phrases {
            let phrase = raw.trimmingCharacters(in: .whitespacesAndNewlines)
            guard !phrase.isEmpty, seen.insert(Self.fileStem(for: phrase)).inserted else { continue }
            let path = manifestPath(for: phrase)
            if FileManager.default.fileExists(atPath: path) {
                found.append((phrase, path))
            } else {
                missing.append(MissingWakeModel(phrase: phrase, expectedPath: path, command: Self.trainingCommand(for: phrase)))
            }
        }
        return (found, missing)
    }

    /// Loads every phrase that has a model. Missing ones are returned, not thrown, so the node
    /// can listen for the rest; a model that exists but does not load is an error.
    public func load(_ phrases: [String]) throws(WakeWordError) -> (models: [WakeModel], missing: [MissingWakeModel]) {
        let (found, missing) = resolve(phrases)
        var models: [WakeModel] = []
        for (_, path) in found { models.append(try WakeModel.load(manifestPath: path)) }
        return (models, missing)
    }

    /// Phrases of every manifest in the directory, sorted by file name.
    public func availablePhrases() -> [String] {
        let files = (try? FileManager.default.contentsOfDirectory(atPath: directory)) ?? []
        return files.filter { $0.hasSuffix(".json") }.sorted().compactMap { name in
            let path = (directory as NSString).appendingPathComponent(name)
            guard let data = FileManager.default.contents(atPath: path),
                  let m = try? JSONDecoder().decode(WakeModelManifest.self, from: data), m.format == "clawvoice-wake" else { return nil }
            return m.phrase
        }
    }

    /// Where the models are: `$CLAWVOICE_MODELS_DIR`; else a `models/` directory holding wake
    /// manifests beside an ancestor of the executable (a checkout's `.build/<triple>/debug/`
    /// finds the checkout's `models/`); else `<prefix>/share/clawvoice/models` for an executable
    /// in `<prefix>/bin`; else `./models`; else `/usr/local/share/clawvoice/models`.
    public static func defaultDirectory(environment: [String: String] = ProcessInfo.processInfo.environment,
                                        executablePath: String? = nil,
                                        currentDirectory: String = FileManager.default.currentDirectoryPath) -> String {
        if let dir = environment["CLAWVOICE_MODELS_DIR"], !dir.isEmpty { return dir }
        let exe = executablePath ?? (try? FileManager.default.destinationOfSymbolicLink(atPath: "/proc/self/exe"))
            ?? CommandLine.arguments.first ?? ""
        var candidates: [String] = []
        if !exe.isEmpty {
            var dir = ((exe as NSString).standardizingPath as NSString).deletingLastPathComponent
            candidates.append(((dir as NSString).deletingLastPathComponent as NSString).appendingPathComponent("share/clawvoice/models"))
            for _ in 0..<5 {
                candidates.append((dir as NSString).appendingPathComponent("models"))
                let up = (dir as NSString).deletingLastPathComponent
                if up == dir { break }
                dir = up
            }
        }
        candidates.append((currentDirectory as NSString).appendingPathComponent("models"))
        for c in candidates where hasWakeManifest(c) { return c }
        return "/usr/local/share/clawvoice/models"
    }

    static func hasWakeManifest(_ dir: String) -> Bool {
        guard let files = try? FileManager.default.contentsOfDirectory(atPath: dir) else { return false }
        return files.contains { name in
            name.hasSuffix(".json") && (FileManager.default.contents(atPath: (dir as NSString).appendingPathComponent(name))
                .map { String(decoding: $0.prefix(200), as: UTF8.self).contains("clawvoice-wake") } ?? false)
        }
    }
}

private extension String {
    func leftPadded(to n: Int) -> String { count >= n ? self : String(repeating: "0", count: n - count) + self }
}
