// SpeechSynthesizer owns the process's one espeak-ng engine: on-device speech for when the
// gateway has no clip or sends one that cannot be played. It is the only file that calls
// espeak-ng. VoiceSettings is the voice, rate, pitch and volume, with the reply-directive
// mapping (`lang`, `speed`, `rate`) as a pure function.
internal import CEspeak
public import ClawvoiceCore
import Synchronization

/// How espeak-ng should speak. Units and ranges are espeak-ng's own.
public struct VoiceSettings: Sendable, Equatable {
    /// Voice or language name as `espeak-ng -v` takes it (`en-us`, `de`, `fr`, `en-us+f3`).
    public var voice: String
    /// Speaking rate in words per minute, 80…450 (espeakRATE_MINIMUM…MAXIMUM).
    public var rateWpm: Int
    /// Base pitch, 0…100 (50 is the voice's normal).
    public var pitch: Int
    /// Amplitude, 0…200 (100 is normal; above it may clip).
    public var volume: Int

    /// espeak-ng's accepted rate range in words per minute.
    public static let rateRange = 80...450
    /// The rate a `speed` of 1.0 means, matching the gateway's `rateWpm / 175` rule.
    public static let normalRateWpm = 175

    public init(voice: String = "en-us", rateWpm: Int = 175, pitch: Int = 50, volume: Int = 100) {
        self.voice = voice
        self.rateWpm = rateWpm
        self.pitch = pitch
        self.volume = volume
    }

    /// These settings with a reply's voice directive applied (talk-and-voice §3.4):
    /// `lang` picks the voice (`en_US` → `en-us`); `rateWpm` (the directive's `rate`) sets the
    /// rate directly, else `speed` scales 175 wpm. The rate is clamped to 80…450; blank or
    /// non-positive values are ignored.
    public func applying(lang: String?, speed: Double?, rateWpm: Int?) -> VoiceSettings {
        var next = self
        if let lang {
            let name = lang.trimmingWhitespace.lowercased().replacingUnderscores
            if !name.isEmpty { next.voice = name }
        }
        if let rateWpm, rateWpm > 0 {
            next.rateWpm = rateWpm
        } else if let speed, speed.isFinite, speed > 0 {
            next.rateWpm = Int((Double(Self.normalRateWpm) * speed).rounded())
        }
        next.rateWpm = min(max(next.rateWpm, Self.rateRange.lowerBound), Self.rateRange.upperBound)
        return next
    }
}

/// espeak-ng text-to-speech, synchronous, into PCM.
///
/// espeak-ng keeps its state in process globals and is not thread-safe, so every call here
/// runs under one process-wide lock and the engine is initialised once, on first use. Calls
/// block the calling thread for as long as synthesis takes (about a millisecond per second of
/// speech on a desktop, more on a Pi, plus any wait for the lock); run them off the
/// cooperative pool when the text is long.
public enum SpeechSynthesizer {
    /// Speaks `text` into one buffer at espeak-ng's rate (22050 Hz mono with the stock data).
    public static func synthesize(_ text: String, settings: VoiceSettings = VoiceSettings()) throws(SpeechError) -> PCMBuffer {
        var samples: [Int16] = []
        var format = AudioFormat(sampleRateHz: 22_050, channels: 1)
        _ = try synthesize(text, settings: settings) { chunk in
            format = chunk.format
            samples += chunk.samples
            return true
        }
        if samples.isEmpty { format = try outputFormat() }
        return PCMBuffer(format: format, samples: samples)
    }

    /// Speaks `text`, handing each chunk of audio to `onChunk` as espeak-ng produces it
    /// (about 40 ms at a time). Return false from `onChunk` to stop. Returns true when the
    /// whole text was spoken, false when `onChunk` stopped it.
    ///
    /// `onChunk` runs on the calling thread while the espeak-ng lock is held: keep it short
    /// and never call back into `SpeechSynthesizer` from it.
    @discardableResult
    public static func synthesize(_ text: String, settings: VoiceSettings = VoiceSettings(),
                                  onChunk: (PCMBuffer) -> Bool) throws(SpeechError) -> Bool {
        try withoutActuallyEscaping(onChunk) { (onChunk) throws(SpeechError) -> Bool in
            try engine.withLock { (state) throws(SpeechError) -> Bool in
                let rate = try state.start()
                try apply(settings)
                let sink = SynthesisSink(format: AudioFormat(sampleRateHz: rate, channels: 1), onChunk: onChunk)
                let context = Unmanaged.passRetained(sink)
                defer { context.release() }
                // Size counts the terminating NUL; a NUL inside the text ends it there.
                let status = text.withCString { utf8 in
                    espeak_ng_Synthesize(utf8, text.utf8.count + 1, 0, POS_CHARACTER, 0, UInt32(espeakCHARS_UTF8), nil, context.toOpaque())
                }
                // A callback that asked to stop can surface as ENS_SPEECH_STOPPED; that is the
                // caller's choice, not a failure.
                if status != ENS_OK && !(sink.stopped && status == ENS_SPEECH_STOPPED) {
                    throw .synthesis(call: "espeak_ng_Synthesize", message: message(status))
                }
                return !sink.stopped
            }
        }
    }

    /// The format espeak-ng produces (mono, at the rate of its voice data).
    public static func outputFormat() throws(SpeechError) -> AudioFormat {
        let rate = try engine.withLock { (state) throws(SpeechError) -> Int in try state.start() }
        return AudioFormat(sampleRateHz: rate, channels: 1)
    }

    /// Every language name the installed voices speak (`af`, `en-us`, `fr-be`, …), sorted.
    /// Any of them works as `VoiceSettings.voice`. Empty when espeak-ng cannot start.
    public static func voices() -> [String] {
        (try? engine.withLock { (state) throws(SpeechError) -> [String] in
            _ = try state.start()
            guard let list = espeak_ListVoices(nil) else { return [] }
            var names = Set<String>()
            var i = 0
            while let voice = list[i] {
                // `languages` is a run of (priority byte, NUL-terminated name), ended by a 0 byte.
                if var p = voice.pointee.languages {
                    while p.pointee != 0 {
                        p += 1   // skip the priority byte
                        let name = String(cString: p)
                        if !name.isEmpty { names.insert(name) }
                        p += name.utf8.count + 1
                    }
                }
                i += 1
            }
            return names.sorted()
        }) ?? []
    }

    private static func apply(_ settings: VoiceSettings) throws(SpeechError) {
        guard !settings.voice.isEmpty else { throw .unknownVoice(settings.voice) }
        let status = espeak_ng_SetVoiceByName(settings.voice)
        if status == ENS_VOICE_NOT_FOUND { throw .unknownVoice(settings.voice) }
        if status != ENS_OK { throw .synthesis(call: "espeak_ng_SetVoiceByName(\(settings.voice))", message: message(status)) }
        let rate = min(max(settings.rateWpm, VoiceSettings.rateRange.lowerBound), VoiceSettings.rateRange.upperBound)
        let parameters: [(espeak_PARAMETER, Int, String)] = [
            (espeakRATE, rate, "espeakRATE"),
            (espeakPITCH, min(max(settings.pitch, 0), 100), "espeakPITCH"),
            (espeakVOLUME, min(max(settings.volume, 0), 200), "espeakVOLUME"),
        ]
        for (parameter, value, name) in parameters {
            let status = espeak_ng_SetParameter(parameter, Int32(value), 0)
            if status != ENS_OK { throw .synthesis(call: "espeak_ng_SetParameter(\(name))", message: message(status)) }
        }
    }

    static func message(_ status: espeak_ng_STATUS) -> String {
        var buffer = [CChar](repeating: 0, count: 512)
        espeak_ng_GetStatusCodeMessage(status, &buffer, buffer.count)
        return String(decoding: buffer.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)
    }
}

/// The one engine. Holding the lock is what makes a call into espeak-ng safe.
private let engine = Mutex(EngineState())

/// Whether espeak-ng has been started, and with what result.
private struct EngineState {
    /// Sample rate once started; the start error if it failed (it is not retried).
    var started: Result<Int, SpeechError>?

    /// Milliseconds of audio per synth callback: small enough that the first sound arrives
    /// early, large enough that callback overhead stays negligible.
    static let chunkMilliseconds: Int32 = 40

    mutating func start() throws(SpeechError) -> Int {
        if let started { return try started.get() }
        let result = Self.initialize()
        started = result
        return try result.get()
    }

    private static func initialize() -> Result<Int, SpeechError> {
        // NULL: espeak-ng's compiled-in data directory, or $ESPEAK_DATA_PATH when set.
        espeak_ng_InitializePath(nil)
        var context: espeak_ng_ERROR_CONTEXT?
        let status = espeak_ng_Initialize(&context)
        espeak_ng_ClearErrorContext(&context)
        guard status == ENS_OK else {
            return .failure(.unavailable(call: "espeak_ng_Initialize", message: SpeechSynthesizer.message(status)))
        }
        let output = espeak_ng_InitializeOutput(ENOUTPUT_MODE_SYNCHRONOUS, chunkMilliseconds, nil)
        guard output == ENS_OK else {
            return .failure(.unavailable(call: "espeak_ng_InitializeOutput", message: SpeechSynthesizer.message(output)))
        }
        espeak_SetSynthCallback(synthCallback)
        return .success(Int(espeak_ng_GetSampleRate()))
    }
}

/// Where one synthesis call's audio goes; reached from the C callback through `user_data`.
private final class SynthesisSink {
    let format: AudioFormat
    let onChunk: (PCMBuffer) -> Bool
    var stopped = false

    init(format: AudioFormat, onChunk: @escaping (PCMBuffer) -> Bool) {
        self.format = format
        self.onChunk = onChunk
    }
}

/// espeak-ng's synth callback: copy the samples out before returning; 1 means "stop".
private func synthCallback(_ wav: UnsafeMutablePointer<Int16>?, _ count: Int32, _ events: UnsafeMutablePointer<espeak_EVENT>?) -> Int32 {
    guard let userData = events?.pointee.user_data else { return 0 }
    let sink = Unmanaged<SynthesisSink>.fromOpaque(userData).takeUnretainedValue()
    if sink.stopped { return 1 }
    if let wav, count > 0 {
        let chunk = PCMBuffer(format: sink.format, samples: Array(UnsafeBufferPointer(start: wav, count: Int(count))))
        if !sink.onChunk(chunk) { sink.stopped = true }
    }
    return sink.stopped ? 1 : 0
}

private extension String {
    var trimmingWhitespace: String {
        let scalars = unicodeScalars
        guard let start = scalars.firstIndex(where: { !$0.properties.isWhitespace }),
              let end = scalars.lastIndex(where: { !$0.properties.isWhitespace }) else { return "" }
        return String(scalars[start...end])
    }

    var replacingUnderscores: String { String(map { $0 == "_" ? "-" : $0 }) }
}
