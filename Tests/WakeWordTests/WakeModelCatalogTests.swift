import Foundation
import Testing
@testable import WakeWord

@Suite struct WakeModelCatalogTests {
    @Test(arguments: [
        ("openclaw", "openclaw"), ("Hey Claw", "hey-claw"), ("  hey,  claw! ", "hey-claw"), ("R2-D2", "r2-d2"),
        ("computer", "computer"), ("ok_google", "ok-google"), ("café bleu", "caf-bleu"), ("日本", "xe697a5e69cac"),
    ])
    func `phrases map to file stems`(phrase: String, stem: String) {
        #expect(WakeModelCatalog.fileStem(for: phrase) == stem)
    }

    @Test func `the training command is quoted for a shell`() {
        #expect(WakeModelCatalog.trainingCommand(for: "hey claw") == #"make wake-model TRIGGER="hey claw""#)
        #expect(WakeModelCatalog.trainingCommand(for: #"say "hi" $HOME"#) == #"make wake-model TRIGGER="say \"hi\" \$HOME""#)
    }

    @Test func `a trigger with no model is reported with the command that trains it`() throws {
        let dir = FileManager.default.temporaryDirectory.appendingPathComponent("wake-cat-\(UUID().uuidString)").path
        try FileManager.default.createDirectory(atPath: dir, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let (m, data) = WakeModelTests.tinyManifest(sha: try WakeModelTests.frontEnd().manifest.weightsSHA256)
        for f in ["frontend.json", "frontend.bin"] {
            try FileManager.default.copyItem(atPath: Fixtures.modelsDirectory + "/" + f, toPath: dir + "/" + f)
        }
        var manifest = m
        manifest.phrase = "openclaw"
        manifest.weights = "openclaw.bin"
        try JSONEncoder().encode(manifest).write(to: URL(fileURLWithPath: dir + "/openclaw.json"))
        try data.write(to: URL(fileURLWithPath: dir + "/openclaw.bin"))

        let catalog = WakeModelCatalog(directory: dir)
        let (models, missing) = try catalog.load(["openclaw", "Hey Claw", "", "OpenClaw"])
        #expect(models.map(\.phrase) == ["openclaw"])
        #expect(missing.count == 1)
        #expect(missing[0].phrase == "Hey Claw")
        #expect(missing[0].expectedPath == dir + "/hey-claw.json")
        #expect(missing[0].description == "no wake model for \"Hey Claw\" (looked for \(dir)/hey-claw.json); train one with: make wake-model TRIGGER=\"Hey Claw\"")
        #expect(catalog.availablePhrases() == ["openclaw"])

        do {
            _ = try WakeModelCatalog(directory: dir).load(["hey claw"]).models
        }
        let error = WakeWordError.noModels(missing)
        #expect(error.description.contains(#"make wake-model TRIGGER="Hey Claw""#))
    }

    @Test func `the models directory comes from the environment, then the executable, then the prefix`() throws {
        #expect(WakeModelCatalog.defaultDirectory(environment: ["CLAWVOICE_MODELS_DIR": "/opt/m"], executablePath: "/x/bin/clawvoice") == "/opt/m")
        // A checkout: <repo>/.build/x86_64-unknown-linux-gnu/debug/clawvoice finds <repo>/models.
        let repo = URL(fileURLWithPath: Fixtures.modelsDirectory).deletingLastPathComponent().path
        let exe = repo + "/.build/x86_64-unknown-linux-gnu/debug/clawvoice"
        #expect(WakeModelCatalog.defaultDirectory(environment: [:], executablePath: exe, currentDirectory: "/") == Fixtures.modelsDirectory)
        // Nothing anywhere: the install location.
        #expect(WakeModelCatalog.defaultDirectory(environment: [:], executablePath: "/nonexistent/bin/clawvoice", currentDirectory: "/nonexistent")
                == "/usr/local/share/clawvoice/models")
    }
}
