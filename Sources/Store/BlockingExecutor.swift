// BlockingExecutor: a serial executor on a dispatch queue of its own, for an actor whose work
// blocks its thread. SQLite waits up to its busy timeout (5 s) while another process holds the
// write lock (`clawvoice send`, `outbox retry`); on the cooperative pool, which has one thread
// per core (two here), that wait would hold up the gateway sessions' ticks and the talk loop.

public import Dispatch

public final class BlockingExecutor: SerialExecutor {
    private let queue: DispatchQueue

    public init(label: String) { queue = DispatchQueue(label: label) }

    public func enqueue(_ job: consuming ExecutorJob) {
        let job = UnownedJob(job)
        let executor = asUnownedSerialExecutor()
        queue.async { job.runSynchronously(on: executor) }
    }

    public func asUnownedSerialExecutor() -> UnownedSerialExecutor { UnownedSerialExecutor(ordinary: self) }
}
