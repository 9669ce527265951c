// AudioDevice: what `clawvoice audio devices` lists, and the PulseConnection queries that fill it
// (sources, sinks, and which of them the server uses by default).

internal import CPulse
import Foundation

/// A PulseAudio source (microphone, or a sink's monitor) or sink (speaker).
public struct AudioDevice: Sendable, Equatable, CustomStringConvertible {
    /// The name `audio.source` / `audio.sink` take, e.g. `alsa_input.usb-…` or `cv_mic.monitor`.
    public var name: String
    /// The human description, e.g. "USB Headset Analog Mono".
    public var description: String
    /// The device's native sample spec as PulseAudio prints it, e.g. "s16le 2ch 48000Hz".
    public var sampleSpec: String
    /// A source that only mirrors what a sink plays; never a real microphone.
    public var isMonitor: Bool
    /// The active port's name (`analog-input-headset-mic`), if the device has ports.
    public var activePortName: String?
    /// The active port's description ("Headset Microphone").
    public var activePortDescription: String?
    /// The `device.form_factor` property (`headset`, `headphone`, `hands-free`, `webcam`, …).
    public var formFactor: String?
    /// The server's default source or sink.
    public var isDefault: Bool

    public init(
        name: String, description: String, sampleSpec: String, isMonitor: Bool = false,
        activePortName: String? = nil, activePortDescription: String? = nil, formFactor: String? = nil,
        isDefault: Bool = false
    ) {
        self.name = name
        self.description = description
        self.sampleSpec = sampleSpec
        self.isMonitor = isMonitor
        self.activePortName = activePortName
        self.activePortDescription = activePortDescription
        self.formFactor = formFactor
        self.isDefault = isDefault
    }

    /// The port or the form factor says headset, headphone or hands-free (Bluetooth HFP/HSP shows
    /// as `handsfree`/`headset-head-unit`), so the headset button and mic are probably here.
    public var isHeadset: Bool {
        let words = [activePortName, activePortDescription, formFactor].compactMap { $0?.lowercased() }
        return words.contains { word in
            let squashed = word.replacingOccurrences(of: "-", with: "").replacingOccurrences(of: " ", with: "")
            return ["headset", "headphone", "handsfree", "handset"].contains { squashed.contains($0) }
        }
    }
}

extension AudioDevice {
    init(source info: pa_source_info, defaultName: String?) {
        let name = String(cString: info.name)
        self.init(
            name: name,
            description: info.description.map { String(cString: $0) } ?? name,
            sampleSpec: Self.describe(info.sample_spec),
            isMonitor: info.monitor_of_sink != cv_pulse_invalid_index(),
            activePortName: info.active_port.flatMap { $0.pointee.name.map { String(cString: $0) } },
            activePortDescription: info.active_port.flatMap { $0.pointee.description.map { String(cString: $0) } },
            formFactor: pa_proplist_gets(info.proplist, "device.form_factor").map { String(cString: $0) },
            isDefault: name == defaultName)
    }

    init(sink info: pa_sink_info, defaultName: String?) {
        let name = String(cString: info.name)
        self.init(
            name: name,
            description: info.description.map { String(cString: $0) } ?? name,
            sampleSpec: Self.describe(info.sample_spec),
            isMonitor: false,
            activePortName: info.active_port.flatMap { $0.pointee.name.map { String(cString: $0) } },
            activePortDescription: info.active_port.flatMap { $0.pointee.description.map { String(cString: $0) } },
            formFactor: pa_proplist_gets(info.proplist, "device.form_factor").map { String(cString: $0) },
            isDefault: name == defaultName)
    }

    static func describe(_ spec: pa_sample_spec) -> String {
        var spec = spec
        var buffer = [CChar](repeating: 0, count: 64)  // PA_SAMPLE_SPEC_SNPRINT_MAX is 32
        return buffer.withUnsafeMutableBufferPointer { out in
            pa_sample_spec_snprint(out.baseAddress, out.count, &spec)
            return String(cString: out.baseAddress!)
        }
    }
}

/// A device list being collected, and the default name to mark in it.
struct DeviceList: Sendable {
    var defaultName: String?
    var devices: [AudioDevice] = []
}

/// The server's default device names.
struct PulseDefaults: Sendable {
    var sink: String?
    var source: String?
}

extension PulseConnection {
    /// Every source on the server, monitors included, with the default one marked.
    /// - Throws: `PulseError.notConnected` when the server is unreachable for `timeout`.
    public func sources(timeout: Duration = .seconds(5)) async throws -> [AudioDevice] {
        let defaults = try await defaultDevices(timeout: timeout)
        return try await runQuery("pa_context_get_source_info_list", initial: DeviceList(defaultName: defaults.source),
                                  timeout: timeout) { ctx, query in
            pa_context_get_source_info_list(ctx, { _, info, eol, userdata in
                guard let query = PulseQuery<DeviceList>.from(userdata) else { return }
                if eol < 0 {
                    query.finish(.call("pa_context_get_source_info_list", message: query.connection.lastError()))
                } else if eol > 0 {
                    query.finish()
                } else if let info {
                    query.value.devices.append(AudioDevice(source: info.pointee, defaultName: query.value.defaultName))
                }
            }, query.userdata)
        }.devices
    }

    /// Every sink on the server, with the default one marked.
    /// - Throws: `PulseError.notConnected` when the server is unreachable for `timeout`.
    public func sinks(timeout: Duration = .seconds(5)) async throws -> [AudioDevice] {
        let defaults = try await defaultDevices(timeout: timeout)
        return try await runQuery("pa_context_get_sink_info_list", initial: DeviceList(defaultName: defaults.sink),
                                  timeout: timeout) { ctx, query in
            pa_context_get_sink_info_list(ctx, { _, info, eol, userdata in
                guard let query = PulseQuery<DeviceList>.from(userdata) else { return }
                if eol < 0 {
                    query.finish(.call("pa_context_get_sink_info_list", message: query.connection.lastError()))
                } else if eol > 0 {
                    query.finish()
                } else if let info {
                    query.value.devices.append(AudioDevice(sink: info.pointee, defaultName: query.value.defaultName))
                }
            }, query.userdata)
        }.devices
    }

    func defaultDevices(timeout: Duration) async throws -> PulseDefaults {
        try await runQuery("pa_context_get_server_info", initial: PulseDefaults(), timeout: timeout) { ctx, query in
            pa_context_get_server_info(ctx, { _, info, userdata in
                guard let query = PulseQuery<PulseDefaults>.from(userdata) else { return }
                guard let info else {
                    query.finish(.call("pa_context_get_server_info", message: query.connection.lastError()))
                    return
                }
                query.value.sink = info.pointee.default_sink_name.map { String(cString: $0) }
                query.value.source = info.pointee.default_source_name.map { String(cString: $0) }
                query.finish()
            }, query.userdata)
        }
    }
}
