// libFuzzer target for the TTS clip decoders (Sources/Audio/Codecs: WAV, MP3 via libmpg123,
// Ogg Opus via opusfile, pcm_<rate>), built with Audio's sources by fuzz/run.sh. The first
// input byte picks the label the clip arrives with, the rest are the clip. Properties:
//   * ClipDecoder.decode never crashes; it returns PCM or one ClipDecodeError of one line.
//   * Decoded PCM has a rate inside 8-192 kHz, one or two channels and whole frames, and
//     ClipPlayability gives a verdict on it without crashing.

import Foundation

private let labels: [(String?, String?, String?)] = [
    ("wav", nil, nil), ("mp3_44100_128", "audio/mpeg", ".mp3"), ("opus", "audio/ogg", ".opus"),
    ("pcm_24000", nil, nil), ("pcm_8000", nil, nil), (nil, nil, nil), (nil, "audio/wav", nil), ("pcm", nil, nil),
]

@_cdecl("LLVMFuzzerTestOneInput")
public func fuzz(_ data: UnsafePointer<UInt8>, _ size: Int) -> CInt {
    guard size > 0 else { return 0 }
    let label = labels[Int(data[0]) % labels.count]
    let clip = Array(UnsafeBufferPointer(start: data + 1, count: size - 1))
    do {
        let pcm = try ClipDecoder.decode(clip, outputFormat: label.0, mimeType: label.1, fileExtension: label.2)
        let f = pcm.format
        if !(8_000...192_000).contains(f.sampleRateHz) || !(1...2).contains(f.channels) || pcm.samples.count % f.channels != 0 {
            fatalError("decoded to an impossible buffer: \(f.sampleRateHz) Hz, \(f.channels) channels, \(pcm.samples.count) samples")
        }
        _ = ClipPlayability.problem(pcm, text: "a short reply")
    } catch {
        if error.description.contains("\n") { fatalError("error is more than one line: \(error)") }
    }
    return 0
}
