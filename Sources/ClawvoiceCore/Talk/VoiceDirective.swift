// The optional first-line JSON voice directive of a reply: stripped before speaking, mapped
// onto talk.speak params and, when falling back, onto espeak-ng.

import Foundation
import GatewayProtocol

public struct VoiceDirective: Sendable, Equatable {
    public var voiceId: String?
    public var modelId: String?
    public var speed: Double?
    public var rateWpm: Int?
    public var language: String?
    public var outputFormat: String?
    /// Without `once`, the directive's voice becomes the new default.
    public var once: Bool = false

    public init() {}

    /// Splits `text` into an optional directive and the text to speak. Only the first
    /// non-empty line counts, and only if it is a JSON object.
    public static func split(_ text: String) -> (VoiceDirective?, String) {
        let lines = text.split(separator: "\n", omittingEmptySubsequences: false)
        guard let index = lines.firstIndex(where: { !$0.trimmingCharacters(in: .whitespaces).isEmpty }) else { return (nil, text) }
        let first = lines[index].trimmingCharacters(in: .whitespaces)
        guard first.hasPrefix("{"), first.hasSuffix("}"),
              let value = try? JSONCoding.decode(JSONValue.self, from: Data(first.utf8)), let o = value.objectValue else {
            return (nil, text)
        }
        var d = VoiceDirective()
        func s(_ keys: String...) -> String? { keys.lazy.compactMap { o[$0]?.stringValue }.first }
        d.voiceId = s("voice", "voice_id", "voiceId")
        d.modelId = s("model", "model_id", "modelId")
        d.speed = o["speed"]?.doubleValue
        d.rateWpm = o["rate"]?.intValue.map(Int.init)
        d.language = s("lang", "language")
        d.outputFormat = s("output_format", "outputFormat")
        d.once = o["once"]?.boolValue ?? false
        let rest = lines[(index + 1)...].joined(separator: "\n")
        return (d, rest.trimmingCharacters(in: .whitespacesAndNewlines))
    }
}
