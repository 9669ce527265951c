import ClawvoiceCore
import Foundation
import Testing
import GatewayProtocol
import Audio
import Talk
@testable import CLI
@testable import Daemon
@testable import NodeRuntime

/// Parses `text` as a config and returns the error's one-line description (nil if it parsed).
private func configError(_ text: String, file: String = "test.json5") -> String? {
    do {
        _ = try ClawConfig.parse(text, file: file)
        return nil
    } catch {
        return error.description
    }
}

private func json5Error(_ text: String) -> JSON5Error? {
    do {
        _ = try JSON5.parse(text)
        return nil
    } catch {
        return error
    }
}

@Suite struct `Config file location and defaults` {
    @Test func `defaults apply when the default config file does not exist`() throws {
        let scratch = try Scratch()
        let env = ["XDG_CONFIG_HOME": scratch.sub("empty-config"), "HOME": scratch.sub("home"),
                   "XDG_STATE_HOME": scratch.sub("xdg-state")]
        let (config, paths) = try RuntimePaths.load(configFlag: nil, environment: env)
        #expect(config == ClawConfig())
        #expect(paths.configFile == scratch.sub("empty-config") + "/clawvoice/config.json5")
        #expect(paths.configExplicit == false)
        #expect(paths.stateDir == scratch.sub("xdg-state") + "/clawvoice")
        #expect(paths.controlSocket == paths.stateDir + "/control.sock")
    }

    @Test func `without XDG variables the paths fall back to HOME`() throws {
        let (_, paths) = try RuntimePaths.load(configFlag: nil, environment: ["HOME": "/nonexistent-home"])
        #expect(paths.configFile == "/nonexistent-home/.config/clawvoice/config.json5")
        #expect(paths.stateDir == "/nonexistent-home/.local/state/clawvoice")
    }

    @Test func `an explicit --config file that is missing is an error naming the file`() throws {
        let scratch = try Scratch()
        let missing = scratch.sub("nope.json5")
        #expect {
            _ = try RuntimePaths.load(configFlag: missing, environment: ["HOME": scratch.path])
        } throws: { error in
            (error as? ConfigError)?.description.contains(missing) == true
        }
    }

    @Test func `the shipped config parses and documents every default`() throws {
        let url = repositoryRoot().appendingPathComponent("config/clawvoice.json5")
        let text = try String(contentsOf: url, encoding: .utf8)
        let parsed = try ClawConfig.parse(text, file: url.path)
        var expected = ClawConfig()
        // The one value that is not literally the default: it depends on the host name.
        expected.node.displayName = parsed.node.displayName
        #expect(parsed == expected)
        #expect(parsed.node.displayName.hasPrefix("clawvoice on "))

        // Every key the schema knows (outside the sections reserved for later parts) is written out.
        let root = try #require(try JSON5.parse(text).objectValue)
        for (section, fields) in ClawConfig.schema where fields["*"] == nil {
            let written = try #require(root[section]?.objectValue, "config/clawvoice.json5 has no '\(section)' section")
            #expect(Set(written.keys) == Set(fields.keys), "section '\(section)' keys differ from the schema")
        }
        #expect(root["stateDir"] != nil, "config/clawvoice.json5 does not document stateDir")
    }

    @Test func `a config file's values are read`() throws {
        let c = try ClawConfig.parse("""
        {
          node: { displayName: "kitchen", modelIdentifier: "RaspberryPi5" },
          gateway: { url: "wss://gw.example:443", token: "t", allowInsecure: true, operatorClient: "openclaw-linux",
                     tlsFingerprint: "sha256:AA:BB:CC:DD:EE:FF:00:11:22:33:44:55:66:77:88:99:AA:BB:CC:DD:EE:FF:00:11:22:33:44:55:66:77:88:99" },
          log: { level: "debug" },
          control: { socket: "/tmp/x.sock" },
          stateDir: "/var/lib/clawvoice",
          audio: { source: "usb_mic", sink: "headset", preRollMs: 500, headset: true },
          talk: { silenceTimeoutMs: 1200, sessionKey: "agent:main:kitchen", outputFormat: "mp3_44100_128", speakReplies: false },
          ptt: { device: "auto", key: "KEY_PHONE", mode: "toggle" },
          speech: { voice: "en-gb", rateWpm: 200 },
          wake: { enabled: false, sensitivity: 0.7, chime: false },
          outbox: { anything: [1, 2] },
        }
        """, file: "f")
        #expect(c.audio == ClawConfig.Audio(source: "usb_mic", sink: "headset", preRollMs: 500, headset: true))
        #expect(c.talk.silenceTimeoutMs == 1200 && c.talk.sessionKey == "agent:main:kitchen")
        #expect(c.talk.outputFormat == "mp3_44100_128" && !c.talk.speakReplies)
        #expect(c.ptt == ClawConfig.PTT(device: "auto", key: "KEY_PHONE", mode: "toggle"))
        #expect(c.speech.voice == "en-gb" && c.speech.rateWpm == 200)
        #expect(c.wake == ClawConfig.Wake(enabled: false, sensitivity: 0.7, chime: .off, modelsDirectory: nil))
        #expect(c.node.displayName == "kitchen")
        #expect(c.node.modelIdentifier == "RaspberryPi5")
        #expect(c.gateway.url == "wss://gw.example:443")
        #expect(c.gateway.token == "t")
        #expect(c.gateway.allowInsecure)
        #expect(c.gateway.operatorClient == "openclaw-linux")
        #expect(c.gateway.tlsFingerprint?.count == 64)
        #expect(c.log.level == .debug)
        #expect(c.control.socket == "/tmp/x.sock")
        #expect(c.stateDir == "/var/lib/clawvoice")
    }
}

@Suite struct `Config errors are clear` {
    @Test func `numbers out of range and bad modes are named with their range`() {
        #expect(configError("{ audio: { preRollMs: 5000 } }")?.contains("'audio.preRollMs' must be a whole number from 0 to 2000") == true)
        #expect(configError("{ talk: { opusComplexity: 11 } }")?.contains("from 0 to 10") == true)
        #expect(configError("{ wake: { sensitivity: 1.5 } }")?.contains("'wake.sensitivity' must be a number from 0.0 to 1.0") == true)
        #expect(configError("{ talk: { silenceTimeoutMs: \"fast\" } }")?.contains("'talk.silenceTimeoutMs' must be a whole number") == true)
        #expect(configError("{ ptt: { mode: \"press\" } }")?.contains("'ptt.mode' must be \"hold\" or \"toggle\"") == true)
        #expect(configError("{ audio: { voiceDetector: \"webrtc\" } }")?.contains("'audio.voiceDetector' must be \"model\" or \"level\"") == true)
    }

    @Test func `the voice detector is the model unless the config says level`() throws {
        #expect(try ClawConfig.parse("{}", file: "f").audio.voiceDetector == .model)
        #expect(try ClawConfig.parse("{ audio: { voiceDetector: \"level\" } }", file: "f").audio.voiceDetector == .level)
    }

    @Test func `an unknown key is named with the near one suggested`() {
        let e = configError("{ gateway: { urll: \"ws://127.0.0.1:18789\" } }")
        #expect(e?.contains("test.json5") == true)
        #expect(e?.contains("'gateway.urll'") == true)
        #expect(e?.contains("did you mean 'url'") == true)

        let top = configError("{ gatway: {} }")
        #expect(top?.contains("'gatway'") == true)
        #expect(top?.contains("did you mean 'gateway'") == true)
    }

    @Test func `null means the default for optional keys and stateDir`() throws {
        let c = try ClawConfig.parse("{ stateDir: null, node: { modelIdentifier: null }, gateway: { url: null } }", file: "f")
        #expect(c == ClawConfig())
    }

    @Test func `an unknown key far from every known one gets no suggestion`() {
        let e = configError("{ node: { zzzzzzzzzz: 1 } }")
        #expect(e?.contains("'node.zzzzzzzzzz'") == true)
        #expect(e?.contains("did you mean") == false)
    }

    @Test func `a value of the wrong type says what it must be`() {
        let e = configError("{ gateway: { allowInsecure: \"yes\" } }")
        #expect(e?.contains("'gateway.allowInsecure' must be true or false") == true)
        #expect(configError("{ gateway: { url: 5 } }")?.contains("'gateway.url' must be a string") == true)
        #expect(configError("{ gateway: 5 }")?.contains("'gateway' must be an object") == true)
        #expect(configError("[1, 2]")?.contains("must be an object") == true)
        #expect(configError("{ log: { level: null } }")?.contains("'log.level' cannot be null") == true)
    }

    @Test func `wake chime is true, false, or a sound file read beside the config`() throws {
        let dir = FileManager.default.temporaryDirectory.appendingPathComponent("cv-chime-\(UUID().uuidString.prefix(8))").path
        try FileManager.default.createDirectory(atPath: dir, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let tone = PCMBuffer(format: .voice, samples: (0..<1600).map { Int16(8000 * sin(Double($0) * 0.3)) })
        _ = FileManager.default.createFile(atPath: dir + "/ding.wav", contents: Data(WAVFile.encode(tone)))
        _ = FileManager.default.createFile(atPath: dir + "/junk.wav", contents: Data("not a sound".utf8))
        let long = PCMBuffer(format: .voice, samples: [Int16](repeating: 100, count: 16_000 * 4))
        _ = FileManager.default.createFile(atPath: dir + "/long.wav", contents: Data(WAVFile.encode(long)))
        let file = dir + "/clawvoice.json5"

        #expect(try ClawConfig.parse("{ wake: { chime: true } }", file: file).wake.chime == .generated)
        #expect(try ClawConfig.parse("{ wake: { chime: false } }", file: file).wake.chime == .off)
        let c = try ClawConfig.parse("{ wake: { chime: \"ding.wav\" } }", file: file)
        #expect(c.wake.chime == .file(dir + "/ding.wav"))
        let sound = c.wake.chime.sound()
        #expect(sound.problem == nil && sound.pcm?.samples.count == 1600)
        #expect(configError("{ wake: { chime: \"missing.wav\" } }", file: file)?.contains("'wake.chime': wake chime \(dir)/missing.wav: no such file") == true)
        #expect(configError("{ wake: { chime: \"junk.wav\" } }", file: file)?.contains("'wake.chime': wake chime \(dir)/junk.wav:") == true)
        #expect(configError("{ wake: { chime: \"long.wav\" } }", file: file)?.contains("a chime must be 3 s or shorter") == true)
        #expect(configError("{ wake: { chime: 3 } }", file: file)?.contains("'wake.chime' must be true, false or a file path") == true)
        // Deleted after the config was read: the generated chime plays, with one line saying why.
        try FileManager.default.removeItem(atPath: dir + "/ding.wav")
        let later = c.wake.chime.sound()
        #expect(later.pcm == WakeChime.generated.sound().pcm)
        #expect(later.problem?.contains("no such file or not readable; playing the generated chime instead") == true)
    }

    @Test func `a bad TLS fingerprint is refused`() {
        let e = configError("{ gateway: { tlsFingerprint: \"abc123\" } }")
        #expect(e?.contains("'gateway.tlsFingerprint' must be a SHA-256 fingerprint") == true)
    }

    @Test func `an invalid log level lists the valid ones`() {
        let e = configError("{ log: { level: \"loud\" } }")
        #expect(e?.contains("'log.level' must be one of debug, info, warning, error") == true)
    }

    @Test func `an empty display name and an unknown operator client are refused`() {
        #expect(configError("{ node: { displayName: \"  \" } }")?.contains("'node.displayName' cannot be empty") == true)
        #expect(configError("{ gateway: { operatorClient: \"web\" } }")?.contains("'gateway.operatorClient' must be") == true)
    }

    @Test(arguments: [
        "{ gateway: { urll: 1 } }",
        "{ \"bad\\nkey\": 1 }",
        "{ node: { \"display\\nName\": \"x\" } }",
        "{ gateway: { allowInsecure: 1 } }",
        "{ gateway: { tlsFingerprint: \"x\" } }",
        "{ log: { level: \"x\" } }",
        "{\n a: 1\n b: 2\n}",
        "{ a: \"unterminated\n}",
        "{} trailing",
        "{ a: 1,, }",
        "/* never closed",
        "",
        "{ a: tru }",
        "{ a: 0xZZ }",
        "{ a: 1, a: 2 }",
    ])
    func `every config error is one line`(_ text: String) {
        let e = configError(text)
        #expect(e != nil)
        #expect(e?.contains("\n") == false, "multi-line error: \(e ?? "")")
    }
}

@Suite struct `JSON5 syntax` {
    @Test func `a missing comma is reported at its line and column`() throws {
        let text = "{\n  a: 1,\n  b: 2\n  c: 3\n}"
        let e = try #require(json5Error(text))
        #expect(e.line == 4)
        #expect(e.column == 3)
        let described = try #require(configError(text, file: "/etc/x.json5"))
        #expect(described.hasPrefix("/etc/x.json5: line 4, column 3:"))
    }

    @Test func `a missing comma on line 3 says line 3`() throws {
        let e = try #require(configError("{\n  node: { displayName: \"a\" }\n  log: { level: \"info\" }\n  gateway: {}\n}"))
        #expect(e.contains("line 3"))
    }

    @Test func `an unterminated string points at its opening quote`() throws {
        let e = try #require(json5Error("{\n  a: \"abc\n}"))
        #expect(e.reason.contains("unterminated string"))
        #expect(e.line == 2)
        #expect(e.column == 6)
        let eof = try #require(json5Error("{ a: 'abc"))
        #expect(eof.reason.contains("unterminated string"))
    }

    @Test func `trailing garbage after the document is an error`() throws {
        let e = try #require(json5Error("{ a: 1 }\n  x"))
        #expect(e.reason.contains("after the end of the document"))
        #expect(e.line == 2)
        #expect(e.column == 3)
    }

    @Test func `an unterminated object or comment is an error`() throws {
        #expect(try #require(json5Error("{ a: 1,")).reason.contains("unterminated object"))
        #expect(try #require(json5Error("{ a: [1, 2, ")).reason.contains("unterminated array"))
        #expect(try #require(json5Error("{ a: [1, 2 ")).reason.contains("found end of file"))
        #expect(try #require(json5Error("{ /* a: 1 }")).reason.contains("unterminated /* comment"))
        #expect(try #require(json5Error("")).reason.contains("unexpected end of file"))
    }

    @Test func `bare words and bad numbers are errors`() throws {
        #expect(try #require(json5Error("{ a: hello }")).reason.contains("strings need quotes"))
        #expect(try #require(json5Error("{ a: 1.2.3 }")).reason.contains("bad number"))
        #expect(try #require(json5Error("{ a: 1, a: 2 }")).reason.contains("duplicate key 'a'"))
    }

    @Test func `comments, trailing commas, single quotes, unquoted keys and hex numbers are accepted`() throws {
        let v = try JSON5.parse("""
        // a line comment
        {
          /* a block
             comment */
          unquoted: 'single quoted',
          "quoted": "double \\"escaped\\" \\u0041",
          $dollar_key1: 0x1F,
          neg: -0XfF,
          plus: +1.5,
          lead: .5,
          trail: 5.,
          exp: 1e3,
          inf: -Infinity,
          list: [1, 2, 3,],
          nested: { t: true, f: false, n: null, },
        }
        """)
        #expect(v["unquoted"]?.stringValue == "single quoted")
        #expect(v["quoted"]?.stringValue == "double \"escaped\" A")
        #expect(v["$dollar_key1"] == .number(31))
        #expect(v["neg"] == .number(-255))
        #expect(v["plus"] == .number(1.5))
        #expect(v["lead"] == .number(0.5))
        #expect(v["trail"] == .number(5))
        #expect(v["exp"] == .number(1000))
        #expect(v["inf"] == .number(-.infinity))
        #expect(v["list"] == .array([.number(1), .number(2), .number(3)]))
        #expect(v["nested"]?["t"] == .bool(true))
        #expect(v["nested"]?["f"] == .bool(false))
        #expect(v["nested"]?["n"] == .null)
    }
}

@Suite struct `Environment overrides` {
    @Test func `CLAWVOICE_GATEWAY_URL and CLAWVOICE_GATEWAY_TOKEN override the file`() throws {
        let scratch = try Scratch()
        try scratch.write("config/clawvoice/config.json5", "{ gateway: { url: 'wss://file.example:1', token: 'file-token' } }")
        var env = ["XDG_CONFIG_HOME": scratch.sub("config"), "HOME": scratch.path]
        let (fromFile, _) = try RuntimePaths.load(configFlag: nil, environment: env)
        #expect(fromFile.gateway.url == "wss://file.example:1")
        #expect(fromFile.gateway.token == "file-token")

        env["CLAWVOICE_GATEWAY_URL"] = "ws://127.0.0.1:9"
        env["CLAWVOICE_GATEWAY_TOKEN"] = "env-token"
        let (overridden, _) = try RuntimePaths.load(configFlag: nil, environment: env)
        #expect(overridden.gateway.url == "ws://127.0.0.1:9")
        #expect(overridden.gateway.token == "env-token")

        // Empty values do not override.
        env["CLAWVOICE_GATEWAY_URL"] = ""
        env["CLAWVOICE_GATEWAY_TOKEN"] = ""
        let (emptyEnv, _) = try RuntimePaths.load(configFlag: nil, environment: env)
        #expect(emptyEnv.gateway.url == "wss://file.example:1")
        #expect(emptyEnv.gateway.token == "file-token")
    }

    @Test func `CLAWVOICE_STATE_DIR sets the state dir and puts the control socket in it`() throws {
        let scratch = try Scratch()
        try scratch.write("config/clawvoice/config.json5", "{ stateDir: '/from/file' }")
        let env = ["XDG_CONFIG_HOME": scratch.sub("config"), "HOME": scratch.path,
                   "CLAWVOICE_STATE_DIR": "/from/env", "XDG_RUNTIME_DIR": "/run/user/1000"]
        let (_, paths) = try RuntimePaths.load(configFlag: nil, environment: env)
        #expect(paths.stateDir == "/from/env")
        #expect(paths.controlSocket == "/from/env/control.sock")
    }

    @Test func `XDG_RUNTIME_DIR holds the control socket otherwise`() throws {
        let scratch = try Scratch()
        let env = ["XDG_CONFIG_HOME": scratch.sub("config"), "HOME": scratch.path,
                   "XDG_RUNTIME_DIR": "/run/user/1000", "XDG_STATE_HOME": "/state-home"]
        let (_, paths) = try RuntimePaths.load(configFlag: nil, environment: env)
        #expect(paths.stateDir == "/state-home/clawvoice")
        #expect(paths.controlSocket == "/run/user/1000/clawvoice/control.sock")
    }

    @Test func `the config file's stateDir and control socket apply when the environment does not set them`() throws {
        let scratch = try Scratch()
        try scratch.write("config/clawvoice/config.json5", "{ stateDir: '/from/file' }")
        let (_, paths) = try RuntimePaths.load(configFlag: nil, environment: ["XDG_CONFIG_HOME": scratch.sub("config"), "HOME": scratch.path])
        #expect(paths.stateDir == "/from/file")
        #expect(paths.controlSocket == "/from/file/control.sock")

        try scratch.write("config/clawvoice/config.json5", "{ control: { socket: '/sock/here' } }")
        let (_, withSocket) = try RuntimePaths.load(configFlag: nil, environment: ["XDG_CONFIG_HOME": scratch.sub("config"), "HOME": scratch.path,
                                                                                 "XDG_RUNTIME_DIR": "/run/user/1"])
        #expect(withSocket.controlSocket == "/sock/here")
    }

    @Test func `CLAWVOICE_CONFIG selects the file and --config wins over it`() throws {
        let scratch = try Scratch()
        let a = try scratch.write("a.json5", "{ node: { displayName: 'from A' } }")
        let b = try scratch.write("b.json5", "{ node: { displayName: 'from B' } }")
        let env = ["XDG_CONFIG_HOME": scratch.sub("config"), "HOME": scratch.path, "CLAWVOICE_CONFIG": a]
        let (viaEnv, paths) = try RuntimePaths.load(configFlag: nil, environment: env)
        #expect(viaEnv.node.displayName == "from A")
        #expect(paths.configFile == a)
        #expect(paths.configExplicit)
        let (viaFlag, _) = try RuntimePaths.load(configFlag: b, environment: env)
        #expect(viaFlag.node.displayName == "from B")

        var missing = env
        missing["CLAWVOICE_CONFIG"] = scratch.sub("missing.json5")
        #expect(throws: ConfigError.self) { _ = try RuntimePaths.load(configFlag: nil, environment: missing) }
    }
}
