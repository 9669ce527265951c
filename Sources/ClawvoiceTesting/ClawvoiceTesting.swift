// ClawvoiceTesting owns the rigs the tests and clawvoice-bench measure with, and their shared
// helpers: the loopback echo room (EchoRoom, EchoRoomPaths), the endpoint bench's speech and
// noises (EndpointBench, BenchNoise), the idle-cost stages (IdleStages), the wake detector's cost
// (WakeBench), the outbox figures on an operator session (OutboxBench, LoopbackOperator), the
// aiortc far end of a call (AiortcPeer) and the call tests' signals.
// Only test targets and clawvoice-bench link it, never `clawvoice`: nothing here ships.
// (PrivatePulseServer stays in NodeRuntime: `clawvoice demo` runs a private PulseAudio.)
// It may use Talk's `package` internals (the capture cleaner, the wake and stop listeners).
