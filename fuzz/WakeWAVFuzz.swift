// libFuzzer target for the WAV reader (WAVFile: gateway clips) followed by what `clawvoice wake
// detect` does to its input (down-mix, resample to 16 kHz; the file itself is now read by
// libsndfile), built with Audio's sources by fuzz/run.sh. Properties:
//   * Reading never crashes; it gives 16 kHz mono or one error line.
//   * The 16 kHz result is about as long as the input (within 10 ms plus the resampler's delay).

import Foundation

@_cdecl("LLVMFuzzerTestOneInput")
public func fuzz(_ data: UnsafePointer<UInt8>, _ size: Int) -> CInt {
    let bytes = Array(UnsafeBufferPointer(start: data, count: size))
    let pcm: PCMBuffer
    do { pcm = try WAVFile.decode(bytes).mono() } catch {
        if error.description.contains("\n") { fatalError("error is more than one line: \(error)") }
        return 0
    }
    do {
        let voice = try Resampler.convert(pcm, toRateHz: 16_000)
        if voice.format.sampleRateHz != 16_000 || voice.format.channels != 1 { fatalError("not 16 kHz mono: \(voice.format)") }
        let expected = pcm.durationMilliseconds
        if abs(voice.durationMilliseconds - expected) > 10 + 5 { fatalError("\(expected) ms became \(voice.durationMilliseconds) ms") }
    } catch {
        if "\(error)".contains("\n") { fatalError("error is more than one line: \(error)") }
    }
    return 0
}
