// BLASKernels: makes Debian's OpenBLAS use the vector kernels this CPU has. OpenBLAS picks its
// kernels from a table of CPU models when the library loads; a CPU newer than the table
// (Debian 12's 0.3.21 does not know Sapphire Rapids, and a VM may hide the model) gets the
// oldest x86-64 kernels ("Prescott", SSE3): the wake front end and heads then take about 1.7x
// the CPU (`clawvoice-bench --wake-only`, with and without OPENBLAS_CORETYPE=Prescott). The
// choice can only be made before the library loads, so the executable re-runs itself once with
// OPENBLAS_CORETYPE set, from the CPU's own feature flags.

import COpenBLAS

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

public enum BLASKernels {
    /// The OpenBLAS core to ask for, or nil to keep the library's own choice: only when it fell
    /// back to the generic kernels, nobody chose one, and the CPU has a better set.
    public static func better(coreName: String, cpuFlags: Set<String>, override: String?) -> String? {
        guard override == nil || override == "", coreName.lowercased() == "prescott" else { return nil }
        if cpuFlags.isSuperset(of: ["avx512f", "avx512bw", "avx512dq", "avx512vl"]) { return "SkylakeX" }
        if cpuFlags.isSuperset(of: ["avx2", "fma"]) { return "Haswell" }
        return nil
    }

    /// The flags of the first processor in /proc/cpuinfo (empty where there is none).
    static func cpuFlags(cpuinfo: String) -> Set<String> {
        for line in cpuinfo.split(separator: "\n") where line.hasPrefix("flags") {
            guard let colon = line.firstIndex(of: ":") else { continue }
            return Set(line[line.index(after: colon)...].split(separator: " ").map(String.init))
        }
        return []
    }

    /// The kernels OpenBLAS is using in this process.
    public static var coreName: String { openblas_get_corename().map { String(cString: $0) } ?? "" }

    /// At the top of `main`: when OpenBLAS fell back to its generic kernels on a CPU with better
    /// ones, re-runs this executable with them (same arguments, environment and PID). Returns
    /// when nothing is to be done or the re-run could not start.
    public static func reexecIfGeneric() {
        #if os(Linux) && arch(x86_64)
        let override = getenv("OPENBLAS_CORETYPE").map { String(cString: $0) }
        guard let text = readSmallFile("/proc/cpuinfo"),
              let core = better(coreName: coreName, cpuFlags: cpuFlags(cpuinfo: text), override: override) else { return }
        setenv("OPENBLAS_CORETYPE", core, 1)
        execv("/proc/self/exe", CommandLine.unsafeArgv)
        unsetenv("OPENBLAS_CORETYPE")      // exec failed: carry on with the generic kernels
        #endif
    }

    private static func readSmallFile(_ path: String) -> String? {
        guard let f = fopen(path, "r") else { return nil }
        defer { fclose(f) }
        var bytes: [UInt8] = []
        var buf = [UInt8](repeating: 0, count: 4096)
        while bytes.count < 1 << 20 {
            let n = fread(&buf, 1, buf.count, f)
            if n <= 0 { break }
            bytes += buf[0..<n]
        }
        return String(decoding: bytes, as: UTF8.self)
    }
}
