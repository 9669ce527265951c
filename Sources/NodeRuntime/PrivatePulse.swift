// A PulseAudio of our own for the demo when the machine has no sound server (or when the
// demo must not touch the user's): two null sinks, one the speaker, one whose monitor is
// the microphone. It lives in a temporary directory and dies with the demo (or the bench),
// however that ends: stop(), or a guardian shell that notices its owner is gone.

import Audio
import ClawvoiceCore
import Foundation
import GatewayCrypto

public final class PrivatePulseServer: Sendable {
    public let directory: String
    public var server: String { "unix:\(directory)/native" }
    public static let speaker = "cv_speaker"
    public static let microphoneSink = "cv_mic"
    public static let microphone = "cv_mic.monitor"
    private let process: Process

    /// Starts `pulseaudio` and waits until it answers. Throws with one line when it cannot.
    public init() async throws {
        guard let binary = ["/usr/bin/pulseaudio", "/usr/local/bin/pulseaudio"].first(where: { FileManager.default.isExecutableFile(atPath: $0) }) else {
            throw ConfigError("no sound server is running and pulseaudio is not installed (apt-get install pulseaudio)")
        }
        directory = FileManager.default.temporaryDirectory.appendingPathComponent("clawvoice-pa-\(UUID().uuidString.prefix(8))").path
        let fm = FileManager.default
        for sub in ["", "/runtime", "/home"] {
            try fm.createDirectory(atPath: directory + sub, withIntermediateDirectories: true, attributes: [.posixPermissions: 0o700])
        }
        let script = """
        load-module module-native-protocol-unix auth-anonymous=1 socket=\(directory)/native
        load-module module-null-sink sink_name=\(Self.speaker) rate=48000 channels=2 sink_properties=device.description=clawvoice-speaker
        load-module module-null-sink sink_name=\(Self.microphoneSink) rate=16000 channels=1 sink_properties=device.description=clawvoice-microphone
        set-default-sink \(Self.speaker)
        set-default-source \(Self.microphone)

        """
        _ = fm.createFile(atPath: directory + "/default.pa", contents: Data(script.utf8))
        // Through a shell that stays: pulseaudio closes every inherited descriptor as it starts,
        // including the one Foundation.Process watches to learn that a child ended; Foundation
        // would then block in waitpid on the live server and never reap another child. The shell
        // keeps that descriptor and exits when pulseaudio does; stop() signals pulseaudio itself
        // (a child of a Swift process may inherit blocked signals, so a trap in the shell is unreliable).
        //
        // The shell also guards against being left behind: when the process that started the
        // server is gone (it exited without stop(), crashed, or was killed by Ctrl-C or kill -9),
        // it stops pulseaudio and removes the directory within about a quarter of a second.
        // The shell inherits a blocked SIGCHLD, so it never reaps: "alive" reads /proc and
        // counts a zombie as dead, and the shell exits rather than `wait`s.
        let guardian = """
        alive() { [ -r /proc/$1/stat ] || return 1; read -r st < /proc/$1/stat || return 1
          case "$st" in *") Z "*) return 1;; esac; return 0; }
        "$0" "$@" & pa=$!; echo $pa > '\(directory)/pulseaudio.pid'
        while alive $pa; do
          if ! alive \(getpid()); then
            kill -TERM $pa 2>/dev/null; n=0
            while alive $pa && [ $n -lt 30 ]; do sleep 0.1; n=$((n+1)); done
            kill -KILL $pa 2>/dev/null; rm -rf '\(directory)'; exit 0
          fi
          sleep 0.2
        done
        """
        let p = Process()
        p.executableURL = URL(fileURLWithPath: "/bin/sh")
        p.arguments = ["-c", guardian,
                       binary, "-n", "--daemonize=no", "--exit-idle-time=-1", "--use-pid-file=no", "--log-target=stderr",
                       "--log-level=error", "-F", directory + "/default.pa"]
        var env = ProcessInfo.processInfo.environment
        env["XDG_RUNTIME_DIR"] = directory + "/runtime"
        env["HOME"] = directory + "/home"
        env.removeValue(forKey: "PULSE_SERVER")
        p.environment = env
        p.standardOutput = FileHandle.nullDevice
        p.standardError = FileHandle.nullDevice
        try p.run()
        process = p
        let probe = PulseConnection(server: "unix:\(directory)/native", clientName: "clawvoice-probe")
        defer { probe.close() }
        do { try await probe.waitUntilReady(timeout: .seconds(8)) } catch {
            stop()
            throw ConfigError("the private pulseaudio did not start: \(error)")
        }
    }

    /// Stops pulseaudio (SIGTERM, SIGKILL after 3 s) and removes its directory.
    public func stop() {
        let pid = (try? String(contentsOfFile: directory + "/pulseaudio.pid", encoding: .utf8))
            .flatMap { Int32($0.trimmingCharacters(in: .whitespacesAndNewlines)) }
        if let pid { kill(pid, SIGTERM) }
        // Polled: Process.waitUntilExit spins a run loop at full CPU on Linux.
        let deadline = Date().addingTimeInterval(3)
        while process.isRunning && Date() < deadline { usleep(20_000) }
        if process.isRunning {
            if let pid { kill(pid, SIGKILL) }
            kill(process.processIdentifier, SIGKILL)
        }
        try? FileManager.default.removeItem(atPath: directory)
    }
}

/// Is there a sound server we may use (PULSE_SERVER or the user's)?
package func soundServerAnswers() async -> Bool {
    let c = PulseConnection(clientName: "clawvoice-probe")
    defer { c.close() }
    return (try? await c.waitUntilReady(timeout: .seconds(2))) != nil
}
