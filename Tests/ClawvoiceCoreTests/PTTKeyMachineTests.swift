// PTTKeyMachine, transition by transition, in both modes. No devices, no threads.

import Testing
import ClawvoiceCore

/// Feeds edges in order and returns what each one answered.
private func run(_ mode: PTTKeyMachine.Mode, _ edges: [KeyEdge]) -> [PTTKeyAction?] {
    var machine = PTTKeyMachine(mode: mode)
    return edges.map { machine.handle($0) }
}

private func machine(_ mode: PTTKeyMachine.Mode, after edges: [KeyEdge]) -> PTTKeyMachine {
    var machine = PTTKeyMachine(mode: mode)
    for edge in edges { _ = machine.handle(edge) }
    return machine
}

@Suite struct `PTTKeyMachine in hold mode` {
    @Test func `a new machine is idle with the key up`() {
        let machine = PTTKeyMachine(mode: .hold)
        #expect(machine.state == .idle(keyDown: false))
        #expect(!machine.isCapturing)
    }

    @Test func `down starts`() {
        #expect(run(.hold, [.down]) == [.start])
        #expect(machine(.hold, after: [.down]).state == .capturing(keyDown: true))
    }

    @Test func `up after down stops`() {
        #expect(run(.hold, [.down, .up]) == [.start, .stop])
        #expect(machine(.hold, after: [.down, .up]).state == .idle(keyDown: false))
    }

    @Test func `repeats while held do nothing`() {
        #expect(run(.hold, [.down, .repeat, .repeat, .up]) == [.start, nil, nil, .stop])
    }

    @Test func `a repeat while idle does nothing`() {
        #expect(run(.hold, [.repeat]) == [nil])
        #expect(machine(.hold, after: [.repeat]).state == .idle(keyDown: false))
    }

    @Test func `an up while idle does nothing`() {
        #expect(run(.hold, [.up]) == [nil])
        #expect(machine(.hold, after: [.up]).state == .idle(keyDown: false))
    }

    @Test func `a second down without an up is ignored`() {
        #expect(run(.hold, [.down, .down, .up]) == [.start, nil, .stop])
    }

    @Test func `losing the device while held stops`() {
        #expect(run(.hold, [.down, .deviceLost]) == [.start, .stop])
        #expect(machine(.hold, after: [.down, .deviceLost]).state == .idle(keyDown: false))
    }

    @Test func `losing the device while idle does nothing`() {
        #expect(run(.hold, [.deviceLost]) == [nil])
        #expect(run(.hold, [.down, .up, .deviceLost]) == [.start, .stop, nil])
    }

    @Test func `the release after a lost device does nothing and the next press starts`() {
        #expect(run(.hold, [.down, .deviceLost, .up, .down, .up]) == [.start, .stop, nil, .start, .stop])
    }

    @Test func `press and release twice gives start stop start stop`() {
        #expect(run(.hold, [.down, .up, .down, .up]) == [.start, .stop, .start, .stop])
    }
}

@Suite struct `PTTKeyMachine in toggle mode` {
    @Test func `down starts and up does nothing`() {
        #expect(run(.toggle, [.down, .up]) == [.start, nil])
        #expect(machine(.toggle, after: [.down, .up]).state == .capturing(keyDown: false))
    }

    @Test func `the next down stops`() {
        #expect(run(.toggle, [.down, .up, .down]) == [.start, nil, .stop])
        #expect(machine(.toggle, after: [.down, .up, .down]).state == .idle(keyDown: true))
    }

    @Test func `the up after the stopping press does nothing`() {
        #expect(run(.toggle, [.down, .up, .down, .up]) == [.start, nil, .stop, nil])
        #expect(machine(.toggle, after: [.down, .up, .down, .up]).state == .idle(keyDown: false))
    }

    @Test func `a third press starts again`() {
        #expect(run(.toggle, [.down, .up, .down, .up, .down]) == [.start, nil, .stop, nil, .start])
    }

    @Test func `a second down while starting is ignored`() {
        #expect(run(.toggle, [.down, .down, .up]) == [.start, nil, nil])
        #expect(machine(.toggle, after: [.down, .down, .up]).isCapturing)
    }

    @Test func `a second down while stopping is ignored`() {
        #expect(run(.toggle, [.down, .up, .down, .down, .up]) == [.start, nil, .stop, nil, nil])
        #expect(!machine(.toggle, after: [.down, .up, .down, .down]).isCapturing)
    }

    @Test func `repeats do nothing in either state`() {
        #expect(run(.toggle, [.repeat, .down, .repeat, .up, .repeat]) == [nil, .start, nil, nil, nil])
    }

    @Test func `an up while idle does nothing`() {
        #expect(run(.toggle, [.up]) == [nil])
    }

    @Test func `losing the device while capturing with the key up stops`() {
        #expect(run(.toggle, [.down, .up, .deviceLost]) == [.start, nil, .stop])
        #expect(machine(.toggle, after: [.down, .up, .deviceLost]).state == .idle(keyDown: false))
    }

    @Test func `losing the device while capturing with the key down stops`() {
        #expect(run(.toggle, [.down, .deviceLost]) == [.start, .stop])
    }

    @Test func `losing the device while idle does nothing and clears the held key`() {
        #expect(run(.toggle, [.deviceLost]) == [nil])
        // The key was down when the device went; the next press on a new device must start.
        #expect(run(.toggle, [.down, .up, .down, .deviceLost, .down]) == [.start, nil, .stop, nil, .start])
    }
}
