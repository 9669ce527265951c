// `clawvoice service`: the plan as a pure function of the facts, and the unit text.

import Foundation
import Testing
@testable import CLI
@testable import Daemon
@testable import NodeRuntime

@Suite struct ServicePlanTests {
    func facts(exe: String = "/home/pi/.local/bin/clawvoice", installed: String? = nil) -> ServiceFacts {
        ServiceFacts(executable: exe, user: "pi", isRoot: false, configHome: "/home/pi/.config",
                     dataHome: "/home/pi/.local/share", installedUnit: installed)
    }

    @Test func `config/clawvoice.service is the unit text for ~/.local/bin`() throws {
        let file = try String(contentsOf: repositoryRoot().appendingPathComponent("config/clawvoice.service"), encoding: .utf8)
        #expect(file == ServiceUnit.text(executable: "%h/.local/bin/clawvoice"))
    }

    @Test func `a unit installed in ~/.local/share is enabled by name`() {
        let (steps, notes) = ServicePlan.install(facts(installed: "/home/pi/.local/share/systemd/user/clawvoice.service"))
        #expect(steps == [.systemctl(["daemon-reload"]), .systemctl(["enable", "--now", "clawvoice.service"])])
        #expect(notes.contains("to keep it running without a login (and start it at boot): sudo loginctl enable-linger pi"))
    }

    @Test func `the Debian package's unit in /usr/lib/systemd/user is found for /usr/bin and enabled by name`() {
        let unit = "/usr/lib/systemd/user/clawvoice.service"
        #expect(ServiceFacts.installedUnit(executable: "/usr/bin/clawvoice", exists: { $0 == unit }) == unit)
        #expect(ServiceFacts.installedUnit(executable: "/home/pi/.local/bin/clawvoice", exists: { $0 == unit }) == nil)
        let both = ServiceFacts.installedUnit(executable: "/usr/bin/clawvoice", exists: { $0.hasSuffix("clawvoice.service") })
        #expect(both == "/usr/share/systemd/user/clawvoice.service")
        let (steps, notes) = ServicePlan.install(facts(exe: "/usr/bin/clawvoice", installed: unit))
        #expect(steps == [.systemctl(["daemon-reload"]), .systemctl(["enable", "--now", "clawvoice.service"])])
        #expect(notes.contains("unit: \(unit)"))
    }

    @Test func `a unit under another prefix is enabled by its path, which links it`() {
        let unit = "/opt/cv/share/systemd/user/clawvoice.service"
        let (steps, _) = ServicePlan.install(facts(exe: "/opt/cv/bin/clawvoice", installed: unit))
        #expect(steps.last == .systemctl(["enable", "--now", unit]))
    }

    @Test func `a binary with no unit writes its own, and replaces a stale one once a unit is installed`() {
        var f = facts(exe: "/srv/clawvoice")
        let (steps, _) = ServicePlan.install(f)
        #expect(steps.first == .writeUnit(path: "/home/pi/.config/systemd/user/clawvoice.service",
                                          text: ServiceUnit.text(executable: "/srv/clawvoice")))
        f.installedUnit = "/usr/local/share/systemd/user/clawvoice.service"
        f.ownUnitExists = true
        let (again, _) = ServicePlan.install(f)
        #expect(again.first == .removeFile("/home/pi/.config/systemd/user/clawvoice.service"))
        #expect(again.last == .systemctl(["enable", "--now", "clawvoice.service"]))
    }

    @Test func `linger on, root, unpaired and uninstall`() {
        var f = facts()
        f.linger = true
        f.isRoot = true
        f.user = "root"
        f.paired = false
        let notes = ServicePlan.install(f).notes
        #expect(notes.contains { $0.hasPrefix("not paired yet") })
        #expect(notes.last == "linger is on: it runs without a login too")
        #expect(ServicePlan.lingerCommand(f) == "loginctl enable-linger root")
        #expect(ServicePlan.uninstall(f) == [.systemctl(["disable", "--now", "clawvoice.service"]), .systemctl(["daemon-reload"])])
        #expect(ServicePlan.statusLines(enabled: "disabled", active: "inactive", facts: f)
                == ["clawvoice.service: disabled, inactive", "  → clawvoice service install", "linger: on (runs without a login)"])
    }
}
