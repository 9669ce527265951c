import Testing
@testable import WakeWord

/// OpenBLAS's generic fallback is replaced only when the CPU has better kernels and nobody chose.
@Suite struct BLASKernelsTests {
    static let skx: Set<String> = ["sse2", "avx2", "fma", "avx512f", "avx512bw", "avx512dq", "avx512vl"]

    @Test func aGenericFallbackOnAnAVX512CPUGetsSkylakeX() {
        #expect(BLASKernels.better(coreName: "Prescott", cpuFlags: Self.skx, override: nil) == "SkylakeX")
        #expect(BLASKernels.better(coreName: "Prescott", cpuFlags: ["avx2", "fma", "avx512f"], override: nil) == "Haswell")
        #expect(BLASKernels.better(coreName: "Prescott", cpuFlags: ["sse2", "sse3"], override: nil) == nil)
    }

    @Test func aKnownCoreOrAUsersChoiceIsKept() {
        #expect(BLASKernels.better(coreName: "Haswell", cpuFlags: Self.skx, override: nil) == nil)
        #expect(BLASKernels.better(coreName: "Prescott", cpuFlags: Self.skx, override: "Sandybridge") == nil)
    }

    @Test func flagsComeFromTheFirstProcessor() {
        let info = "processor\t: 0\nmodel name\t: Intel(R) Xeon(R) Processor\nflags\t\t: fpu sse2 avx2 fma\n\nprocessor\t: 1\nflags\t\t: fpu\n"
        #expect(BLASKernels.cpuFlags(cpuinfo: info) == ["fpu", "sse2", "avx2", "fma"])
        #expect(BLASKernels.cpuFlags(cpuinfo: "") == [])
    }
}
