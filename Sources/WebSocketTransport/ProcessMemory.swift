// ProcessMemory: makes freed large buffers go back to the system. glibc raises its mmap
// threshold to the size of the largest block freed (up to 32 MiB), so after one 12 MB gateway
// frame every later multi-megabyte buffer came from the heap and stayed resident after free.
// A fixed threshold keeps big buffers mmapped (returned at free); a trim after a large
// message hands back what the heap arenas still hold.

#if canImport(Glibc)
internal import Glibc
#endif

public enum ProcessMemory {
    /// Blocks from this size up are mmapped and unmapped at free.
    public static let mmapThresholdBytes: Int32 = 256 << 10

    // glibc's <malloc.h> is not in Swift's Glibc module; the two functions are looked up by
    // name instead (M_MMAP_THRESHOLD is -3 in malloc.h). Elsewhere they are simply absent.
    private typealias Mallopt = @convention(c) (Int32, Int32) -> Int32
    private typealias MallocTrim = @convention(c) (Int) -> Int32
    private static let mMmapThreshold: Int32 = -3
    private static let mArenaMax: Int32 = -8

    private static func symbol<T>(_ name: String, as type: T.Type) -> T? {
        #if canImport(Glibc)
        guard let handle = dlopen(nil, RTLD_NOW), let p = dlsym(handle, name) else { return nil }
        return unsafeBitCast(p, to: type)
        #else
        return nil
        #endif
    }

    private static let configured: Bool = {
        guard let mallopt = symbol("mallopt", as: Mallopt.self) else { return false }
        return mallopt(mMmapThreshold, mmapThresholdBytes) == 1
    }()

    nonisolated(unsafe) private static let mallocTrim: MallocTrim? = symbol("malloc_trim", as: MallocTrim.self)

    /// Fixes glibc's mmap threshold (once per process; later calls do nothing).
    @discardableResult
    public static func returnLargeBuffersToTheSystem() -> Bool { configured }

    /// At most `count` malloc arenas (glibc makes up to 8 per core, one per thread that contends,
    /// each keeping its own free pages): call at the start of a long-running process.
    @discardableResult
    public static func limitArenas(_ count: Int32) -> Bool {
        guard let mallopt = symbol("mallopt", as: Mallopt.self) else { return false }
        return mallopt(mArenaMax, count) == 1
    }

    /// Returns free heap memory to the system; call after handling a large message.
    public static func trim() {
        _ = mallocTrim?(0)
    }
}
